// Checks of seqflow.Client's compound arguments (bindings/client_arguments.h).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>

#include "bindings/checks.h"
#include "bindings/client_arguments.h"
#include "bindings/json_conversion.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

// Keyword arguments seqflow always hands a sampler itself. task_name and
// partition_id are the request's unless sampling_config names them
// (TransferQueue hands samplers only sampling_config's, and its users put both there).
constexpr const char* kSamplerOwnKeywords[] = {"sample_info", "partition"};

[[noreturn]] void throw_value_error(const std::string& message) { throw nb::value_error(message.c_str()); }

}  // namespace

SamplingConfig sampling_config_of(nb::handle sampling_config) {
  SamplingConfig sampling;
  if (sampling_config.is_none()) return sampling;
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
  if (!dp_rank.is_none()) {
    sampling.dp_rank = check_count(dp_rank, "sampling_config['dp_rank']");
    sampling.dp_rank_given = true;
  }
  nb::object batch_index = sampling_config.attr("get")("batch_index");
  if (!batch_index.is_none()) sampling.batch_index = check_count(batch_index, "sampling_config['batch_index']");
  if (extra.size()) {
    sampling.extra = Value::object();
    for (auto [key, value] : extra) {
      const std::string name = nb::cast<std::string>(key);
      sampling.extra[name] = to_value(value, "sampling_config['" + name + "']");
    }
  }
  return sampling;
}

nb::object checked_custom_meta(nb::handle custom_meta) {
  if (custom_meta.is_none()) return nb::none();
  nb::list entries = check_list(custom_meta, "custom_meta", "a list of dicts (one per sample) or None");
  for (size_t i = 0; i < entries.size(); ++i) {
    check_instance(entries[i], "custom_meta[" + std::to_string(i) + "]", reinterpret_cast<PyObject*>(&PyDict_Type),
                   "a dict");
  }
  return entries;
}

nb::object checked_tags(nb::handle tags, size_t keys) {
  if (tags.is_none()) return nb::none();
  nb::list entries = check_list(tags, "tags", "a list of dicts (one per key) or None");
  if (entries.size() != keys) {
    throw_value_error(std::to_string(entries.size()) + " tags for " + std::to_string(keys) + " keys");
  }
  for (size_t i = 0; i < entries.size(); ++i) check_tag(entries[i], "tags[" + std::to_string(i) + "]");
  return entries;
}

std::vector<std::string> strings(nb::handle values) {
  std::vector<std::string> out;
  for (nb::handle v : values) out.push_back(nb::cast<std::string>(v));
  return out;
}

}  // namespace seqflow::bindings
