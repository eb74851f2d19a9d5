// seqflow.RemoteConfig: how to reach a controller service, checked once, and
// picklable so that a DataLoader worker (or any other process) connects a
// client of its own from it.
#include <nanobind/stl/string.h>

#include <chrono>
#include <cmath>
#include <string>

#include "bindings/checks.h"
#include "bindings/client_object.h"
#include "bindings/gil.h"
#include "seqflow/security.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

constexpr double kDefaultTimeout = 30.0;
constexpr int64_t kDefaultBusyPollUs = 200;  // RemoteOptions::busy_poll's default

constexpr const char* kDoc = R"(How to reach a controller service. Picklable: a DataLoader worker
process (or any other process) connects a client of its own from it.

address: the controller service, e.g. "tcp://10.0.0.1:5555".
timeout: seconds without a reply before a call raises TimeoutError (a
    waiting fetch gets its own wait on top); also the default fetch wait.
polling_mode: the default of get_meta(polling=...).
server_public_key_file, client_key_file: CURVE (both or neither): the
    cluster's .pub file and this client's .key file (seqflow keygen).
local_copy: storage units on this host move large puts and gets through
    memory (one copy by the kernel) instead of TCP; units elsewhere are
    detected and get the bytes. False: always TCP.
busy_poll_us: a control call (get_meta, insert, ...) waiting for its
    reply spins for up to this many microseconds before it sleeps: a
    short call then skips a thread wake-up (20-40 us on a VM). It spins
    only while replies come that fast and while the process waits on
    fewer calls than it has cores. 0: always sleep.)";

[[noreturn]] void throw_value_error(const std::string& message) { throw nb::value_error(message.c_str()); }

// The fields checked, as the constructor takes them.
RemoteConfig checked(nb::handle address, nb::handle timeout, nb::handle polling_mode, nb::handle server_public_key_file,
                     nb::handle client_key_file, nb::handle local_copy, nb::handle busy_poll_us) {
  if (!PyUnicode_Check(address.ptr()) || PyUnicode_GET_LENGTH(address.ptr()) == 0) {
    throw_value_error("address must name the controller service (e.g. tcp://10.0.0.1:5555), got " + repr_text(address));
  }
  RemoteConfig config;
  config.address = nb::borrow(address);
  config.timeout = check_seconds(timeout, "timeout");
  config.polling_mode = check_bool(polling_mode, "polling_mode");
  if (server_public_key_file.is_none() != client_key_file.is_none()) {
    throw_value_error("CURVE needs both server_public_key_file and client_key_file, got " +
                      repr_text(server_public_key_file) + " and " + repr_text(client_key_file));
  }
  if (!client_key_file.is_none()) {
    check_path(server_public_key_file, "server_public_key_file");
    check_path(client_key_file, "client_key_file");
  }
  config.server_public_key_file = nb::borrow(server_public_key_file);
  config.client_key_file = nb::borrow(client_key_file);
  config.local_copy = check_bool(local_copy, "local_copy");
  config.busy_poll_us = check_count(busy_poll_us, "busy_poll_us", 0, kMaxBusyPollUs);
  return config;
}

nb::tuple fields_of(const RemoteConfig& c) {
  return nb::make_tuple(c.address, c.timeout, c.polling_mode, c.server_public_key_file, c.client_key_file, c.local_copy,
                        c.busy_poll_us);
}

std::string python_bool(bool value) { return value ? "True" : "False"; }

std::string repr_of(const RemoteConfig& c) {
  return "RemoteConfig(address=" + repr_text(c.address) + ", timeout=" + repr_text(nb::float_(c.timeout)) +
         ", polling_mode=" + python_bool(c.polling_mode) +
         ", server_public_key_file=" + repr_text(c.server_public_key_file) +
         ", client_key_file=" + repr_text(c.client_key_file) + ", local_copy=" + python_bool(c.local_copy) +
         ", busy_poll_us=" + std::to_string(c.busy_poll_us) + ")";
}

}  // namespace

nb::object config_setting(const nb::dict& settings, const char* key, nb::handle fallback) {
  return settings.contains(key) ? nb::object(settings[key]) : nb::borrow(fallback);
}

nb::object config_timeout(const nb::dict& settings) {
  return config_setting(settings, "timeout",
                        config_setting(settings, "controller.timeout", nb::float_(kDefaultTimeout)));
}

const RemoteConfig& remote_config_of(nb::handle config, std::string_view parameter) {
  RemoteConfig* settings = nullptr;
  if (!nb::try_cast(config, settings) || settings == nullptr) {
    throw_wrong_type(config, parameter, "a RemoteConfig");
  }
  return *settings;
}

std::shared_ptr<Client> connect_remote(const RemoteConfig& config) {
  RemoteOptions options;
  options.controller_endpoint = nb::cast<std::string>(config.address);
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(std::llround(config.timeout * 1000.0)));
  if (!config.client_key_file.is_none()) {
    const std::string server_file = nb::cast<std::string>(check_path(config.server_public_key_file, "_"));
    const std::string client_file = nb::cast<std::string>(check_path(config.client_key_file, "_"));
    const CurveKeyPair server = read_key_file(server_file);
    const CurveKeyPair own = read_key_file(client_file);
    if (own.secret_key.empty()) {
      throw_value_error("client_key_file " + repr_text(config.client_key_file) +
                        " holds no secret key; give the .key file of this client's pair (seqflow keygen), not a .pub "
                        "file");
    }
    options.server_public_key = server.public_key;
    options.client_public_key = own.public_key;
    options.client_secret_key = own.secret_key;
  }
  options.local_copy = config.local_copy;
  options.busy_poll = std::chrono::microseconds(config.busy_poll_us);
  GilReleased release;
  return make_remote_client(options);
}

void bind_remote_config(nb::module_ m) {
  nb::class_<RemoteConfig> cls(m, "RemoteConfig", kDoc);
  // The fields in the order of __init__ and of fields_of (pattern matching; seqflow.client's dataclass fields).
  cls.attr("__match_args__") = nb::make_tuple("address", "timeout", "polling_mode", "server_public_key_file",
                                              "client_key_file", "local_copy", "busy_poll_us");
  cls.def(
         "__init__",
         [](RemoteConfig* self, nb::handle address, nb::handle timeout, nb::handle polling_mode,
            nb::handle server_public_key_file, nb::handle client_key_file, nb::handle local_copy,
            nb::handle busy_poll_us) {
           new (self) RemoteConfig(checked(address, timeout, polling_mode, server_public_key_file, client_key_file,
                                           local_copy, busy_poll_us));
         },
         "address"_a.none(), "timeout"_a.none() = kDefaultTimeout, "polling_mode"_a.none() = false,
         "server_public_key_file"_a.none() = nb::none(), "client_key_file"_a.none() = nb::none(),
         "local_copy"_a.none() = true, "busy_poll_us"_a.none() = kDefaultBusyPollUs)
      .def_prop_ro("address", [](const RemoteConfig& c) { return c.address; })
      .def_ro("timeout", &RemoteConfig::timeout)
      .def_ro("polling_mode", &RemoteConfig::polling_mode)
      .def_prop_ro("server_public_key_file", [](const RemoteConfig& c) { return c.server_public_key_file; })
      .def_prop_ro("client_key_file", [](const RemoteConfig& c) { return c.client_key_file; })
      .def_ro("local_copy", &RemoteConfig::local_copy)
      .def_ro("busy_poll_us", &RemoteConfig::busy_poll_us)
      .def("__repr__", &repr_of)
      .def(
          "__eq__",
          [](const RemoteConfig& self, nb::handle other) -> nb::object {
            RemoteConfig* that = nullptr;
            if (!nb::try_cast(other, that) || that == nullptr) return nb::borrow(Py_NotImplemented);
            return nb::bool_(fields_of(self).equal(fields_of(*that)));
          },
          "other"_a.none())
      .def("__hash__", [](const RemoteConfig& self) { return nb::hash(fields_of(self)); })
      .def("__getstate__", &fields_of)
      .def(
          "__setstate__",
          [](RemoteConfig& self, nb::tuple state) {
            new (&self) RemoteConfig(checked(state[0], state[1], state[2], state[3], state[4], state[5], state[6]));
          },
          "state"_a)
      .def(
          "connect", [](nb::handle self) { return nb::type<PyClient>().attr("_connect")(self); },
          "A client connected with these settings (Client._connect); waits up to `timeout` for the controller and "
          "its storage units.");
  // A classmethod, so that a subclass makes its own kind.
  nb::object from_config = nb::cpp_function(
      [](nb::handle kind, nb::handle config, nb::handle address) {
        static CachedAttribute read_config("seqflow._config", "read_config");
        nb::dict settings = nb::borrow<nb::dict>(read_config(config));
        const nb::object timeout = config_timeout(settings);
        return kind(
            address.is_none() ? config_setting(settings, "controller.address", nb::none()) : nb::borrow(address),
            timeout, config_setting(settings, "controller.polling_mode", nb::bool_(false)),
            config_setting(settings, "security.server_public_key_file", nb::none()),
            config_setting(settings, "security.client_key_file", nb::none()),
            config_setting(settings, "local_copy", nb::bool_(true)),
            config_setting(settings, "busy_poll_us", nb::int_(kDefaultBusyPollUs)));
      },
      nb::name("from_config"), "cls"_a, "config"_a.none(), "address"_a.none() = nb::none(),
      nb::sig("def from_config(cls, config, address: Optional[str] = None) -> RemoteConfig"),
      R"(controller.address (or `address`), timeout (or controller.timeout),
controller.polling_mode, security.server_public_key_file,
security.client_key_file, local_copy and busy_poll_us of a TransferQueue-style config
(checked: see seqflow._config.read_config).)");
  cls.attr("from_config") = nb::steal(PyClassMethod_New(from_config.ptr()));
  // After the methods: each keeps the module that binds it (the typed stubs define them there).
  cls.attr("__module__") = "seqflow.client";
}

}  // namespace seqflow::bindings
