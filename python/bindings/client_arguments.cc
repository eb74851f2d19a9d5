// Checks of seqflow.Client's compound arguments: sampling_config, a remote
// client's settings (RemoteConfig), custom_meta and kv tags. Messages name the
// parameter and the value (bindings/checks.h).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>

#include "bindings/checks.h"
#include "bindings/submodules.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

// Keyword arguments seqflow always hands a sampler itself. task_name and
// partition_id are the request's unless sampling_config names them
// (TransferQueue hands samplers only sampling_config's, and its users put both there).
constexpr const char* kSamplerOwnKeywords[] = {"sample_info", "partition"};

[[noreturn]] void throw_value_error(const std::string& message) { throw nb::value_error(message.c_str()); }

// (dp_rank or None when not given, batch_index, the other keys or None).
nb::tuple sampling_parts(nb::handle sampling_config) {
  if (sampling_config.is_none()) return nb::make_tuple(nb::none(), 0, nb::none());
  if (!is_mapping(sampling_config)) throw_wrong_type(sampling_config, "sampling_config", "a dict or None");
  nb::dict extra;
  for (nb::handle pair : nb::object(sampling_config.attr("items")())) {
    nb::object key = pair[0];
    if (!PyUnicode_Check(key.ptr())) {
      throw_argument_type_error("sampling_config keys must be strings, got " + repr_text(key));
    }
    check_name(key, "sampling_config key");
    const std::string name = nb::cast<std::string>(key);
    for (const char* own : kSamplerOwnKeywords) {
      if (name == own) {
        throw_value_error("sampling_config[" + repr_text(key) + "] clashes with the sampler's own keyword argument " +
                          repr_text(key));
      }
    }
    if (name != "dp_rank" && name != "batch_index") extra[key] = pair[1];
  }
  nb::object dp_rank = sampling_config.attr("get")("dp_rank");
  if (!dp_rank.is_none()) dp_rank = nb::int_(check_count(dp_rank, "sampling_config['dp_rank']"));
  nb::object batch_index = sampling_config.attr("get")("batch_index");
  const int64_t batch = batch_index.is_none() ? 0 : check_count(batch_index, "sampling_config['batch_index']");
  return nb::make_tuple(dp_rank, batch, extra.size() ? nb::object(extra) : nb::none());
}

// RemoteConfig's fields checked: (timeout as a float, busy_poll_us as an int).
nb::tuple remote_config_checks(nb::handle address, nb::handle timeout, nb::handle polling_mode,
                               nb::handle server_public_key_file, nb::handle client_key_file, nb::handle local_copy,
                               nb::handle busy_poll_us) {
  if (!PyUnicode_Check(address.ptr()) || PyUnicode_GET_LENGTH(address.ptr()) == 0) {
    throw_value_error("address must name the controller service (e.g. tcp://10.0.0.1:5555), got " + repr_text(address));
  }
  const double seconds = check_seconds(timeout, "timeout");
  check_bool(polling_mode, "polling_mode");
  if (server_public_key_file.is_none() != client_key_file.is_none()) {
    throw_value_error("CURVE needs both server_public_key_file and client_key_file, got " +
                      repr_text(server_public_key_file) + " and " + repr_text(client_key_file));
  }
  if (!client_key_file.is_none()) {
    check_path(server_public_key_file, "server_public_key_file");
    check_path(client_key_file, "client_key_file");
  }
  check_bool(local_copy, "local_copy");
  return nb::make_tuple(seconds, check_count(busy_poll_us, "busy_poll_us", 0, kMaxBusyPollUs));
}

// put's custom_meta: None, or a list of dicts (one per sample), as a list.
nb::object checked_custom_meta(nb::handle custom_meta) {
  if (custom_meta.is_none()) return nb::none();
  nb::list entries = check_list(custom_meta, "custom_meta", "a list of dicts (one per sample) or None");
  for (size_t i = 0; i < entries.size(); ++i) {
    check_instance(entries[i], "custom_meta[" + std::to_string(i) + "]", reinterpret_cast<PyObject*>(&PyDict_Type),
                   "a dict");
  }
  return entries;
}

// kv_batch_put's tags: None, or one tag per key, as a list.
nb::object checked_tags(nb::handle tags, size_t keys) {
  if (tags.is_none()) return nb::none();
  nb::list entries = check_list(tags, "tags", "a list of dicts (one per key) or None");
  if (entries.size() != keys) {
    throw_value_error(std::to_string(entries.size()) + " tags for " + std::to_string(keys) + " keys");
  }
  for (size_t i = 0; i < entries.size(); ++i) check_tag(entries[i], "tags[" + std::to_string(i) + "]");
  return entries;
}

}  // namespace

void bind_client_arguments(nb::module_ m) {
  m.def("sampling_parts", &sampling_parts, nb::arg("sampling_config").none(),
        "(dp_rank or None when not given, batch_index, the other keys or None) of a sampling_config.");
  m.def("remote_config_checks", &remote_config_checks, nb::arg("address").none(), nb::arg("timeout").none(),
        nb::arg("polling_mode").none(), nb::arg("server_public_key_file").none(), nb::arg("client_key_file").none(),
        nb::arg("local_copy").none(), nb::arg("busy_poll_us").none(),
        "RemoteConfig's fields checked: (timeout as a float, busy_poll_us as an int).");
  m.def("checked_custom_meta", &checked_custom_meta, nb::arg("custom_meta").none(),
        "put's custom_meta: None, or a list of dicts (one per sample), as a list.");
  m.def("checked_tags", &checked_tags, nb::arg("tags").none(), nb::arg("keys"),
        "kv_batch_put's tags: None, or one tag per key, as a list.");
}

}  // namespace seqflow::bindings
