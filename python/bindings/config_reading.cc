// seqflow._config: reading TransferQueue-style configs (dicts or OmegaConf
// configs), shared by the client and the services, without importing torch.
//
// read_config checks every key a seqflow config may hold: a value of the
// wrong type raises naming its key and value, an unknown key raises naming it
// (a typo would otherwise be ignored silently). TransferQueue's own keys pass
// (backend, metrics, controller.zmq_info): TransferQueue configs hold settings
// of storage backends seqflow does not have.
#include <nanobind/stl/string.h>

#include <algorithm>
#include <array>
#include <string>
#include <string_view>

#include "bindings/checks.h"
#include "bindings/submodules.h"

namespace nb = nanobind;

namespace seqflow::bindings {

namespace {

enum class Check { kAddress, kAnything, kMapping, kBool, kSeconds, kCount, kPositiveCount, kPath, kBusyPoll };

struct Setting {
  std::string_view key;
  Check check;
};

// Each key seqflow reads, with its check; None values count as unset.
constexpr std::array<Setting, 17> kSettings{{
    {"controller.address", Check::kAddress},
    {"controller.sampler", Check::kAnything},  // checked where it is used (seqflow.samplers.native_sampler)
    {"controller.sampler_args", Check::kMapping},
    {"controller.polling_mode", Check::kBool},
    {"controller.timing_alignment", Check::kPositiveCount},
    {"controller.timeout", Check::kSeconds},
    {"timeout", Check::kSeconds},
    {"storage.max_bytes", Check::kCount},
    {"storage.max_samples", Check::kCount},
    {"backend.SimpleStorage.total_storage_size", Check::kCount},
    {"security.server_public_key_file", Check::kPath},
    {"security.client_key_file", Check::kPath},
    {"security.server_secret_key_file", Check::kPath},
    {"security.curve_keys", Check::kPath},
    {"local_copy", Check::kBool},
    {"busy_poll_us", Check::kBusyPoll},
    {"checkpoint_root", Check::kPath},
}};
constexpr std::array<std::string_view, 7> kSections{
    "controller", "storage", "security", "backend", "backend.SimpleStorage", "metrics", "seqflow"};
// Keys of TransferQueue (and of seqflow.compat.transfer_queue's "seqflow"
// section) that configs given to seqflow may hold: accepted, and not seqflow's
// to read or check.
constexpr std::string_view kOthersKey = "controller.zmq_info";
constexpr std::array<std::string_view, 3> kOthersSections{"backend.", "metrics.", "seqflow."};

nb::object checked(nb::handle value, const std::string& path, Check check) {
  switch (check) {
    case Check::kAddress:
      if (!PyUnicode_Check(value.ptr()) || PyUnicode_GET_LENGTH(value.ptr()) == 0) {
        throw_argument_type_error(path + " must name the controller service (e.g. tcp://10.0.0.1:5555), got " +
                                  repr_text(value));
      }
      return nb::borrow(value);
    case Check::kAnything:
      return nb::borrow(value);
    case Check::kMapping:
      if (!is_mapping(value)) throw_wrong_type(value, path, "a dict");
      return nb::borrow(value);
    case Check::kBool:
      return nb::bool_(check_bool(value, path));
    case Check::kSeconds:
      return nb::float_(check_seconds(value, path));
    case Check::kCount:
      return nb::int_(check_count(value, path));
    case Check::kPositiveCount:
      return nb::int_(check_count(value, path, 1));
    case Check::kPath:
      return check_path(value, path);
    case Check::kBusyPoll:
      return nb::int_(check_count(value, path, 0, kMaxBusyPollUs));
  }
  return nb::borrow(value);
}

bool is_other(const std::string& path) {
  if (path == kOthersKey) return true;
  for (std::string_view section : kOthersSections) {
    if (path.starts_with(section)) return true;
  }
  return false;
}

[[noreturn]] void throw_unknown(const std::string& path) {
  std::string known;
  for (const Setting& setting : kSettings) known += (known.empty() ? "" : ", ") + std::string(setting.key);
  throw nb::value_error(
      ("config key " + repr_text(nb::str(path.c_str())) + " is unknown; seqflow reads " + known).c_str());
}

void read_section(nb::handle section, const std::string& prefix, nb::dict& settings) {
  for (nb::handle key : section) {
    if (!PyUnicode_Check(key.ptr())) {
      const std::string where = prefix.empty() ? "config" : prefix.substr(0, prefix.size() - 1);
      throw_argument_type_error("config keys must be str, got " + repr_text(key) + " in " + where);
    }
    const std::string path = prefix + nb::cast<std::string>(key);
    nb::object value = section[key];
    if (value.is_none()) continue;
    if (std::find(kSections.begin(), kSections.end(), path) != kSections.end()) {
      if (!is_mapping(value)) {
        throw_argument_type_error("config key " + repr_text(nb::str(path.c_str())) + " must be a dict, got " +
                                  type_name_of(value) + " " + repr_text(value));
      }
      read_section(value, path + ".", settings);
      continue;
    }
    const auto setting = std::find_if(kSettings.begin(), kSettings.end(),
                                      [&](const Setting& candidate) { return candidate.key == path; });
    if (setting != kSettings.end()) {
      settings[path.c_str()] = checked(value, path, setting->check);
    } else if (!is_other(path)) {
      throw_unknown(path);
    }
  }
}

// The settings a config sets, checked, by dotted key ("controller.timeout").
nb::dict read_config(nb::handle config) {
  nb::dict settings;
  if (config.is_none()) return settings;
  if (!is_mapping(config)) {
    throw_argument_type_error("config must be a dict or an OmegaConf config, got " + type_name_of(config) + " " +
                              repr_text(config));
  }
  read_section(config, "", settings);
  return settings;
}

// config["a"]["b"] for path "a.b", for dicts and OmegaConf configs alike.
nb::object config_get(nb::handle config, const std::string& path, nb::handle fallback) {
  nb::object node = nb::borrow(config);
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('.', start), path.size());
    if (node.is_none()) return nb::borrow(fallback);
    if (!nb::hasattr(node, "get")) {
      node = nb::none();
    } else {
      try {
        node = node.attr("get")(path.substr(start, end - start));
      } catch (const nb::python_error&) {  // OmegaConf raises on missing keys in struct mode
        return nb::borrow(fallback);
      }
    }
    start = end + 1;
  }
  return node.is_none() ? nb::borrow(fallback) : node;
}

}  // namespace

void bind_config_reading(nb::module_ m) {
  m.attr("MAX_BUSY_POLL_US") = kMaxBusyPollUs;
  m.def("read_config", &read_config, nb::arg("config").none(),
        "The settings a config sets, checked, by dotted key (\"controller.timeout\").");
  m.def("config_get", &config_get, nb::arg("config").none(), nb::arg("path"), nb::arg("default").none() = nb::none(),
        "config[\"a\"][\"b\"] for path \"a.b\", for dicts and OmegaConf configs alike.");
}

}  // namespace seqflow::bindings
