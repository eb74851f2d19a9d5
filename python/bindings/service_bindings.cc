// seqflow._seqflow.server: the controller and storage services in this
// process (seqflow.serve_controller / serve_storage, Ray actors) over the
// public seqflow/server.h, with the settings of `seqflow serve`, and CURVE
// key files (seqflow/security.h). Starting and stopping release the GIL: a
// controller's handlers may call a sampler written in Python.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "bindings/checks.h"
#include "bindings/gil.h"
#include "bindings/storage_stats.h"
#include "bindings/submodules.h"
#include "seqflow/error.h"
#include "seqflow/sampler.h"
#include "seqflow/security.h"
#include "seqflow/server.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

// A controller or storage service running in this process. Handles still
// serving are stopped at exit (stop_live_services), while the interpreter
// can still run the Python samplers their handlers may be calling.
class ServiceHandle {
 public:
  // Starting may load a checkpoint that restores a Python sampler's state: no GIL held.
  template <class Server, class Options>
  static std::unique_ptr<ServiceHandle> start(std::string role, Options options) {
    std::unique_ptr<Server> server;
    {
      GilReleased release;
      server = std::make_unique<Server>(std::move(options));
    }
    auto handle =
        std::unique_ptr<ServiceHandle>(new ServiceHandle(std::move(role), server->endpoint(), server->metrics_url()));
    if constexpr (std::is_same_v<Server, StorageServer>) {
      handle->storage_ = std::move(server);
    } else {
      handle->controller_ = std::move(server);
    }
    return handle;
  }

  ~ServiceHandle() {
    live().erase(this);
    GilReleased release;  // the handlers' threads may be waiting for the GIL (Python samplers)
    controller_.reset();
    storage_.reset();
  }

  ServiceHandle(const ServiceHandle&) = delete;
  ServiceHandle& operator=(const ServiceHandle&) = delete;

  static std::set<ServiceHandle*>& live() {
    static std::set<ServiceHandle*> handles;
    return handles;
  }

  const std::string& role() const { return role_; }
  const std::string& endpoint() const { return endpoint_; }

  std::optional<int> metrics_port() const {
    if (metrics_url_.empty()) return std::nullopt;
    const std::string address = metrics_address();
    return std::stoi(address.substr(address.rfind(':') + 1));
  }

  std::string serving_line() const {
    std::string line = "seqflow " + role_ + " serving on " + endpoint_;
    if (!metrics_url_.empty()) line += " metrics on " + metrics_address();
    return line;
  }

  nb::dict stats() const {
    if (role_ != "storage") throw nb::value_error(("stats() is a storage unit's, this is the " + role_).c_str());
    return stats_to_python(storage_->stats());
  }

  void stop() {
    live().erase(this);
    GilReleased release;
    if (controller_) controller_->stop();  // none: the parent's service, in a child after fork
    if (storage_) storage_->stop();
  }

  // In a child after fork the services' threads are the parent's: stopping
  // or destroying them here would wait for them forever, so the child leaks them.
  void abandon() {
    live().erase(this);
    (void)controller_.release();
    (void)storage_.release();
  }

 private:
  ServiceHandle(std::string role, std::string endpoint, std::string metrics_url)
      : role_(std::move(role)), endpoint_(std::move(endpoint)), metrics_url_(std::move(metrics_url)) {
    live().insert(this);
  }

  // http://HOST:PORT of the metrics URL (without its /metrics path).
  std::string metrics_address() const { return metrics_url_.substr(0, metrics_url_.rfind('/')); }

  std::string role_;
  std::string endpoint_;
  std::string metrics_url_;
  std::unique_ptr<ControllerServer> controller_;
  std::unique_ptr<StorageServer> storage_;
};

// A path argument (str or os.PathLike) as os.fspath reads it; "" for None.
std::string path_text(nb::handle value) {
  if (value.is_none()) return "";
  nb::object path = nb::steal(PyOS_FSPath(value.ptr()));
  if (!path.is_valid()) throw nb::python_error();
  return nb::cast<std::string>(path);
}

// 0 (the service's default) for None, else an integer >= 1.
size_t optional_count(nb::handle value, std::string_view name) {
  return value.is_none() ? 0 : static_cast<size_t>(check_count(value, name, 1));
}

// curve_clients: one path or a sequence of them.
std::vector<std::string> client_key_files(nb::handle values) {
  static CachedAttribute path_like("os", "PathLike");
  if (PyUnicode_Check(values.ptr()) || PyObject_IsInstance(values.ptr(), path_like.ptr()) == 1) {
    return {path_text(values)};
  }
  std::vector<std::string> out;
  if (!values.is_none()) {
    for (nb::handle value : values) out.push_back(path_text(value));
  }
  return out;
}

// The public options name some settings by their C++ fields; Python's
// parameters have `seqflow serve`'s names, which the errors keep.
template <class Fn>
auto with_python_names(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Error& error) {
    std::string message = error.what();
    for (const auto& [field, parameter] :
         {std::pair<std::string_view, std::string_view>{"metrics_address ", "metrics "},
          {"controller_endpoint ", "controller "}}) {
      if (message.starts_with(field)) message = std::string(parameter) + message.substr(field.size());
    }
    throw Error(error.code(), message);
  }
}

// The settings both services take, into their options.
template <class Options>
void apply_serving(Options& options, nb::handle metrics, nb::handle max_workers, nb::handle max_request_bytes,
                   nb::handle curve_secret, nb::handle curve_clients, nb::handle curve_keys,
                   nb::handle checkpoint_root) {
  options.metrics_address = PyObject_IsTrue(metrics.ptr()) == 1 ? nb::cast<std::string>(metrics) : "";
  options.max_workers = optional_count(max_workers, "max_workers");
  options.max_request_bytes = optional_count(max_request_bytes, "max_request_bytes");
  const std::string secret = path_text(curve_secret);
  const std::vector<std::string> clients = client_key_files(curve_clients);
  const std::string keys = path_text(curve_keys);
  options.checkpoint_root = path_text(checkpoint_root);
  if (!keys.empty()) {
    if (!secret.empty() || !clients.empty()) {
      throw_invalid("curve_keys '" + keys + "' replaces curve_secret and curve_clients: give one or the other");
    }
    const auto named = [](const Error& error) {
      return Error(error.code(), std::string("curve_keys: ") + error.what());
    };
    try {
      options.curve = read_cluster_curve(keys);
      if (!options.metrics_address.empty()) options.metrics_token = read_metrics_token(keys);
    } catch (const Error& error) {
      throw named(error);
    }
    return;
  }
  options.curve = read_server_curve(secret, clients);  // a missing or bad key file first
  if (options.curve.enabled && clients.empty()) {
    throw_invalid("curve_secret '" + secret +
                  "' needs curve_clients: a CURVE service admits only listed client keys; list their .pub files, "
                  "or use curve_keys=DIR (seqflow keygen --cluster DIR)");
  }
}

std::unique_ptr<ServiceHandle> serve_controller(const std::string& bind, nb::handle storage_units, nb::handle sampler,
                                                nb::handle sampler_args, nb::handle polling_mode,
                                                nb::handle timing_alignment, nb::handle load_checkpoint,
                                                nb::handle metrics, nb::handle max_workers,
                                                nb::handle max_request_bytes, nb::handle curve_secret,
                                                nb::handle curve_clients, nb::handle curve_keys,
                                                nb::handle checkpoint_root) {
  ControllerServerOptions options;
  options.bind = bind;
  options.storage_units = static_cast<size_t>(check_count(storage_units, "storage_units", 1));
  static CachedAttribute native_sampler("seqflow.samplers", "native_sampler");
  const nb::object handle = native_sampler(sampler, sampler_args);
  if (!handle.is_none()) options.controller.sampler = nb::cast<std::shared_ptr<Sampler>>(handle);
  options.controller.polling_mode = PyObject_IsTrue(polling_mode.ptr()) == 1;
  options.controller.timing_alignment = check_count(timing_alignment, "timing_alignment", 1);
  options.load_checkpoint = path_text(load_checkpoint);
  apply_serving(options, metrics, max_workers, max_request_bytes, curve_secret, curve_clients, curve_keys,
                checkpoint_root);
  return with_python_names([&] { return ServiceHandle::start<ControllerServer>("controller", std::move(options)); });
}

std::unique_ptr<ServiceHandle> serve_storage(const std::string& controller, const std::string& bind,
                                             nb::handle advertise, nb::handle max_bytes, nb::handle max_samples,
                                             nb::handle metrics, nb::handle max_workers, nb::handle max_request_bytes,
                                             nb::handle curve_secret, nb::handle curve_clients, nb::handle curve_keys,
                                             nb::handle controller_key, nb::handle checkpoint_root) {
  StorageServerOptions options;
  options.bind = bind;
  options.controller_endpoint = controller;
  options.advertise = PyObject_IsTrue(advertise.ptr()) == 1 ? nb::cast<std::string>(advertise) : "";
  options.storage.max_bytes = static_cast<uint64_t>(check_count(max_bytes, "max_bytes"));
  options.storage.max_samples = static_cast<uint64_t>(check_count(max_samples, "max_samples"));
  const std::string controller_key_file = path_text(controller_key);
  apply_serving(options, metrics, max_workers, max_request_bytes, curve_secret, curve_clients, curve_keys,
                checkpoint_root);
  if (!controller_key_file.empty()) {
    if (!options.curve.enabled) {
      throw_invalid("controller key file '" + controller_key_file +
                    "' needs the storage unit's own CURVE secret key file for its calls to the controller");
    }
    options.controller_public_key = read_key_file(controller_key_file).public_key;
  }
  return with_python_names([&] { return ServiceHandle::start<StorageServer>("storage", std::move(options)); });
}

std::string keygen(nb::handle prefix_arg, nb::handle overwrite) {
  const std::string prefix = path_text(prefix_arg);
  if (PyObject_IsTrue(overwrite.ptr()) != 1) {
    for (const std::string& path : {prefix + ".key", prefix + ".pub"}) {
      if (std::filesystem::exists(path)) {
        throw_invalid("prefix " + repr_text(nb::str(prefix.c_str(), prefix.size())) + ": " + path +
                      " exists; pass overwrite=True to replace it");
      }
    }
  }
  const CurveKeyPair keys = generate_curve_keys();
  write_key_files(prefix, keys);
  return keys.public_key;
}

}  // namespace

void bind_services(nb::module_ m) {
  nb::class_<ServiceHandle>(m, "ServiceHandle", "A controller or storage service running in this process.")
      .def_prop_ro("role", &ServiceHandle::role)
      .def_prop_ro("endpoint", &ServiceHandle::endpoint, "The bound endpoint, e.g. tcp://127.0.0.1:40123.")
      .def_prop_ro("metrics_port", &ServiceHandle::metrics_port, "The metrics endpoint's port, or None.")
      .def_prop_ro("serving_line", &ServiceHandle::serving_line,
                   "What ``seqflow serve`` prints: 'seqflow ROLE serving on ENDPOINT[ metrics on URL]'.")
      .def("stats", &ServiceHandle::stats,
           "A storage unit's use: {\"samples\": ..., \"bytes\": ..., \"overhead_bytes\": ...}.")
      .def("stop", &ServiceHandle::stop, "Stops serving (idempotent): running calls finish, queued ones are dropped.")
      .def("abandon", &ServiceHandle::abandon,
           "Forget the service without stopping it (in a child process after fork).")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def(
          "__exit__", [](ServiceHandle& self, nb::args) { self.stop(); }, nb::sig("def __exit__(self, *exc) -> None"))
      .def("__repr__",
           [](const ServiceHandle& self) {
             return "ServiceHandle(" + repr_text(nb::str(self.role().c_str())) + ", " +
                    repr_text(nb::str(self.endpoint().c_str())) + ")";
           })
      .attr("__module__") = "seqflow.remote";

  m.def("serve_controller", &serve_controller, "bind"_a = "tcp://127.0.0.1:5555", nb::kw_only(),
        "storage_units"_a.none() = 1, "sampler"_a.none() = nb::none(), "sampler_args"_a.none() = nb::none(),
        "polling_mode"_a.none() = false, "timing_alignment"_a.none() = 1, "load_checkpoint"_a.none() = nb::none(),
        "metrics"_a.none() = nb::none(), "max_workers"_a.none() = nb::none(), "max_request_bytes"_a.none() = nb::none(),
        "curve_secret"_a.none() = nb::none(), "curve_clients"_a.none() = nb::tuple(),
        "curve_keys"_a.none() = nb::none(), "checkpoint_root"_a.none() = nb::none(),
        nb::sig("def serve_controller(bind: str = 'tcp://127.0.0.1:5555', *, storage_units: int = 1, sampler=None, "
                "sampler_args: dict | None = None, polling_mode: bool = False, timing_alignment: int = 1, "
                "load_checkpoint: str | None = None, "
                "metrics: str | None = None, max_workers: int | None = None, max_request_bytes: int | None = None, "
                "curve_secret: str | None = None, curve_clients: Sequence[str] = (), curve_keys: str | None = None, "
                "checkpoint_root: str | None = None) -> ServiceHandle"),
        "The controller service in this process, serving when this returns\n"
        "(``seqflow serve controller``; port 0 in `bind` picks a free port).\n\n"
        "storage_units: units clients wait for. sampler: an instance, class or\n"
        "name (sampler_args for a class or name), Python samplers included.\n"
        "timing_alignment: see Client (seqflow serve controller --timing-alignment).\n"
        "metrics: \"HOST:PORT\" of a Prometheus endpoint. curve_keys: a cluster key\n"
        "directory (seqflow keygen --cluster DIR): CURVE with DIR/cluster.key,\n"
        "admitting DIR/cluster.pub and DIR/clients/*.pub, metrics behind\n"
        "DIR/metrics.token. Or curve_secret: the cluster .key file with\n"
        "curve_clients: .pub files (or directories of them) of the admitted\n"
        "clients (required with curve_secret).\n"
        "checkpoint_root: clients' save_checkpoint / load_checkpoint paths must\n"
        "lie under this directory (default: $SEQFLOW_CHECKPOINT_ROOT, else\n"
        "~/.local/state/seqflow/checkpoints, made 0700; a relative path lies under it).");
  m.def("serve_storage", &serve_storage, "controller"_a, "bind"_a = "tcp://127.0.0.1:0", nb::kw_only(),
        "advertise"_a.none() = nb::none(), "max_bytes"_a.none() = 0, "max_samples"_a.none() = 0,
        "metrics"_a.none() = nb::none(), "max_workers"_a.none() = nb::none(), "max_request_bytes"_a.none() = nb::none(),
        "curve_secret"_a.none() = nb::none(), "curve_clients"_a.none() = nb::tuple(),
        "curve_keys"_a.none() = nb::none(), "controller_key"_a.none() = nb::none(),
        "checkpoint_root"_a.none() = nb::none(),
        nb::sig("def serve_storage(controller: str, bind: str = 'tcp://127.0.0.1:0', *, advertise: str | None = None, "
                "max_bytes: int = 0, max_samples: int = 0, metrics: str | None = None, max_workers: int | None = "
                "None, max_request_bytes: int | None = None, curve_secret: str | None = None, curve_clients: "
                "Sequence[str] = (), curve_keys: str | None = None, controller_key: str | None = None, "
                "checkpoint_root: str | None = None) -> ServiceHandle"),
        "A storage unit in this process that registers with the controller\n"
        "service at `controller` (``seqflow serve storage``). advertise: the\n"
        "endpoint clients reach it at (default the bound one). max_bytes,\n"
        "max_samples: capacity (0: unlimited). curve_keys, curve_secret,\n"
        "curve_clients: as for serve_controller. controller_key: the controller's\n"
        ".pub file when it is not the cluster key. checkpoint_root: as for\n"
        "serve_controller.");
  m.def("keygen", &keygen, "prefix"_a.none(), nb::kw_only(), "overwrite"_a.none() = false,
        nb::sig("def keygen(prefix, *, overwrite: bool = False) -> str"),
        "A new CURVE key pair as prefix.key (public and secret key, mode 0600)\n"
        "and prefix.pub; returns the public key (Z85).");
  m.def(
      "read_key_file",
      [](nb::handle path) {
        const CurveKeyPair keys = read_key_file(path_text(path));
        return std::make_pair(keys.public_key, keys.secret_key.empty() ? std::nullopt : std::optional(keys.secret_key));
      },
      "path"_a.none(), nb::sig("def read_key_file(path) -> tuple[str, str | None]"),
      "(public key, secret key or None) of a .key or .pub file, as Z85 text.");
  m.def(
      "stop_live_services",
      [] {
        const std::set<ServiceHandle*> handles = ServiceHandle::live();
        for (ServiceHandle* handle : handles) handle->stop();
      },
      "Stops every service still serving (at exit, while Python samplers can still run).");
  m.def(
      "forget_parent_services",
      [] {
        const std::set<ServiceHandle*> handles = ServiceHandle::live();
        for (ServiceHandle* handle : handles) handle->abandon();
      },
      "In a child after fork: the services' threads are the parent's; never stop or free them here.");
}

}  // namespace seqflow::bindings
