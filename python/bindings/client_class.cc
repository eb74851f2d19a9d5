// seqflow.Client's life cycle: an embedded client (the constructor), a remote
// one (remote, _connect, from_config), close, pickling and fork. The calls
// themselves are bound in client_calls.cc and client_kv.cc.
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include <array>
#include <set>
#include <stdexcept>

#include "bindings/checks.h"
#include "bindings/client_object.h"
#include "bindings/gil.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqflow::bindings {

namespace {

constexpr double kDefaultTimeout = 30.0;

constexpr const char* kClientDoc = R"(A client: embedded (controller and storage in this process; this
constructor) or remote (Client.remote; services reached over ZeroMQ).

sampler: a BaseSampler instance or subclass, or a name (default sequential).
polling_mode: the default of get_meta(polling=...): True returns an empty
    batch at once when too little is ready; False waits up to `timeout`.
max_bytes, max_samples: storage capacity (0: unlimited).
timeout: seconds a non-polling fetch waits by default.
timing_alignment: > 1 fits each task's workload model (report_timing) with
    a term for sequence lengths that are not a multiple of it, as
    seqflow.balance.calibrate(alignment=...) does (default 1: none).

Errors: bad arguments raise ValueError, reading or writing samples, fields
and keys that do not exist raises KeyError (StaleSampleError, a KeyError,
for a BatchMeta whose samples were cleared, whose indexes hold other samples
now, or whose partition_ids name another partition), a fetch that waited too
long raises TimeoutError; the state is unchanged after any of them. A
partition that does not exist (yet, or any more) is no error: fetches find
nothing ready in it (a waiting fetch waits for it), status checks are False,
clears and resets do nothing.

allow_pickle (False; settable per client): non-tensor values that are not
plain (None, bool, int, float, str, bytes, lists and str-keyed dicts of
them) are stored pickled only when allowed: reading a pickle runs code of
whoever wrote it. Calls that take allow_pickle= override it.)";

// Remote clients of this process, whose connections a forked child abandons.
std::set<PyClient*>& remote_clients() {
  static auto* clients = new std::set<PyClient*>();  // never destroyed: clients may outlive static destructors
  return *clients;
}

// Serializes connecting on first use (threading.RLock, made anew in a forked
// child: a copy held by another parent thread would never be released).
nb::handle connect_lock;

nb::handle new_lock() {
  static CachedAttribute rlock("threading", "RLock");
  return rlock().release();
}

// Keeps `client` for good: destroying it would wait for threads that will
// never finish (a parent's after fork, parked ones at interpreter exit).
void leak(std::shared_ptr<Client>&& client) { new std::shared_ptr<Client>(std::move(client)); }

// A remote client whose last reference goes without the GIL: its teardown
// waits for ZeroMQ's I/O threads, which may be releasing a borrowed array
// (a frame of a failed put) and need the GIL for it. While the interpreter
// finalizes, such a thread may be parked for good (see gil.h), so the client
// is left to the process's exit instead.
std::shared_ptr<Client> torn_down_without_gil(std::shared_ptr<Client> client) {
  Client* raw = client.get();
  return std::shared_ptr<Client>(raw, [inner = std::move(client)](Client*) mutable {
    if (python_finalizing()) return leak(std::move(inner));
    std::optional<GilReleased> release;
    if (PyGILState_Check()) release.emplace();
    inner.reset();
  });
}

std::shared_ptr<Client> connected_client(nb::handle config) {
  return torn_down_without_gil(connect_remote(remote_config_of(config, "config")));
}

// A `kind` (Client or a subclass) without running its __init__: a remote client of `config`.
nb::object remote_instance(nb::handle kind, nb::handle config, std::shared_ptr<Client> native, double timeout,
                           nb::handle services) {
  const bool polling_mode = remote_config_of(config, "config").polling_mode;
  nb::object self = nb::inst_alloc(kind);
  new (nb::inst_ptr<PyClient>(self))
      PyClient(std::move(native), polling_mode, timeout, nb::none(), nb::borrow(config), nb::borrow(services));
  nb::inst_mark_ready(self);
  return self;
}

void after_fork_in_child() {
  connect_lock = new_lock();
  for (PyClient* client : remote_clients()) client->abandon();
}

// The Python objects a client holds, for the garbage collector (a sampler or
// the Ray services may refer back to the client), with its __dict__.
int client_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (PyObject** dict = _PyObject_GetDictPtr(self)) Py_VISIT(*dict);
  if (!nb::inst_ready(self)) return 0;
  for (nb::handle held : nb::inst_ptr<PyClient>(self)->held_objects()) Py_VISIT(held.ptr());
  return 0;
}

int client_clear(PyObject* self) {
  if (PyObject** dict = _PyObject_GetDictPtr(self)) Py_CLEAR(*dict);
  if (nb::inst_ready(self)) nb::inst_ptr<PyClient>(self)->release_objects();
  return 0;
}

PyType_Slot client_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(client_traverse)},
                              {Py_tp_clear, reinterpret_cast<void*>(client_clear)},
                              {0, nullptr}};

template <typename... Extra>
void def_classmethod(ClientClass& cls, const char* name, auto&& function, const Extra&... extra) {
  nb::object method = nb::cpp_function(std::forward<decltype(function)>(function), nb::name(name), extra...);
  cls.attr(name) = nb::steal(PyClassMethod_New(method.ptr()));
}

}  // namespace

PyClient::PyClient(std::shared_ptr<Client> native, bool polling_mode, double timeout, nb::object sampler,
                   nb::object remote_config, nb::object services)
    : timeout(timeout),
      sampler(std::move(sampler)),
      remote_config(std::move(remote_config)),
      native_(std::move(native)),
      connect_on_use_(native_ == nullptr),
      polling_mode_(polling_mode),
      services_(std::move(services)) {
  if (is_remote()) remote_clients().insert(this);
}

PyClient::~PyClient() { remote_clients().erase(this); }

std::shared_ptr<Client> PyClient::connected() {
  if (connect_on_use_) {  // first call in a child process after fork, or after unpickling
    nb::object lock = nb::borrow(connect_lock);
    lock.attr("acquire")();
    try {
      if (connect_on_use_) {
        std::shared_ptr<Client> fresh = connected_client(remote_config);
        if (connect_on_use_) native_ = std::move(fresh);
        connect_on_use_ = false;
      }
    } catch (...) {
      lock.attr("release")();
      throw;
    }
    lock.attr("release")();
  }
  if (!native_) throw std::runtime_error("this seqflow client is closed");
  return native_;
}

void PyClient::close() {
  native_.reset();
  connect_on_use_ = false;
  nb::object services = std::exchange(services_, nb::none());
  if (!services.is_none()) services.attr("stop")();
}

void PyClient::abandon() {
  // The sockets and I/O threads belong to the parent: destroying them here
  // would tear down the parent's connections, so the child leaks its copy.
  if (!native_) return;
  leak(std::move(native_));
  connect_on_use_ = true;
}

std::array<nb::handle, 3> PyClient::held_objects() const { return {sampler, remote_config, services_}; }

void PyClient::release_objects() {
  sampler = nb::none();
  remote_config = nb::none();
  services_ = nb::none();
}

bool pickle_allowed(PyClient& self, nb::handle allow_pickle) {
  if (!allow_pickle.is_none()) return check_bool(allow_pickle, "allow_pickle");
  return nb::cast<bool>(nb::find(&self).attr("allow_pickle"));
}

void bind_client_class(nb::module_ m) {
  ClientClass cls(m, "Client", kClientDoc, nb::dynamic_attr(), nb::is_weak_referenceable(),
                  nb::type_slots(client_slots));
  cls.attr("allow_pickle") = false;
  cls.def(
         "__init__",
         [](PyClient* self, nb::handle sampler, nb::handle polling_mode, nb::handle max_bytes, nb::handle max_samples,
            nb::handle timeout, nb::handle sampler_args, nb::handle timing_alignment) {
           const double seconds = check_seconds(timeout, "timeout");
           if (!sampler_args.is_none()) {
             static CachedAttribute mapping("collections.abc", "Mapping");
             check_instance(sampler_args, "sampler_args", mapping, "a dict or None");
           }
           static CachedAttribute native_sampler("seqflow.samplers", "native_sampler");
           nb::object handle = native_sampler(sampler, sampler_args);
           const bool polling = check_bool(polling_mode, "polling_mode");
           const uint64_t bytes = check_count(max_bytes, "max_bytes");
           const uint64_t samples = check_count(max_samples, "max_samples");
           const int64_t alignment = check_count(timing_alignment, "timing_alignment", 1);
           // polling_mode is this client's default, as in remote mode: a request that says polling=False waits.
           ControllerOptions controller{handle.is_none() ? nullptr : nb::cast<std::shared_ptr<Sampler>>(handle), false,
                                        alignment};
           new (self) PyClient(make_embedded_client(std::move(controller), StorageOptions{bytes, samples}), polling,
                               seconds, nb::borrow(sampler), nb::none(), nb::none());
         },
         "sampler"_a.none() = nb::none(), nb::kw_only(), "polling_mode"_a.none() = false, "max_bytes"_a.none() = 0,
         "max_samples"_a.none() = 0, "timeout"_a.none() = kDefaultTimeout, "sampler_args"_a.none() = nb::none(),
         "timing_alignment"_a.none() = 1,
         nb::sig("def __init__(self, sampler=None, *, polling_mode: bool = False, max_bytes: int = 0, "
                 "max_samples: int = 0, timeout: float = 30.0, sampler_args: Optional[dict] = None, timing_alignment: "
                 "int = 1) -> None"))
      .def_rw("timeout", &PyClient::timeout, "Seconds a non-polling fetch waits by default.")
      .def_rw("sampler", &PyClient::sampler, "The sampler given to the constructor (None for a remote client).")
      .def_ro("remote_config", &PyClient::remote_config, "The RemoteConfig of a remote client; None when embedded.")
      .def_prop_ro("is_remote", &PyClient::is_remote)
      .def_prop_ro("polling_mode", &PyClient::polling_mode, "The default of get_meta(polling=...).")
      .def("close", &PyClient::close,
           "Releases the controller and the storage (arrays already returned\n"
           "stay valid); stops the services this client started (Ray).")
      .def("__reduce__", [](nb::handle self) {
        PyClient& client = nb::cast<PyClient&>(self);
        if (!client.is_remote()) {
          throw nb::type_error(
              "an embedded seqflow client cannot be pickled: its controller and storage live in this process. Use a "
              "remote client (seqflow serve, or seqflow.init(backend='ray'))");
        }
        // The services stay with the process that started them; the copy connects on first use.
        return nb::make_tuple(self.type().attr("_unpickled"),
                              nb::make_tuple(client.remote_config, client.timeout, self.attr("allow_pickle")));
      });
  def_classmethod(
      cls, "_unpickled",
      [](nb::handle kind, nb::handle config, double timeout, nb::handle allow_pickle) {
        nb::object self = remote_instance(kind, config, nullptr, timeout, nb::none());
        self.attr("allow_pickle") = allow_pickle;
        return self;
      },
      "cls"_a, "config"_a, "timeout"_a, "allow_pickle"_a.none(), "A pickled remote client, connecting on first use.");
  def_classmethod(
      cls, "_connect",
      [](nb::handle kind, nb::handle config, nb::handle services) {
        std::shared_ptr<Client> native = connected_client(config);
        return remote_instance(kind, config, std::move(native), remote_config_of(config, "config").timeout, services);
      },
      "cls"_a, "config"_a, "services"_a.none() = nb::none(),
      nb::sig("def _connect(cls, config: RemoteConfig, services=None) -> Client"),
      "A remote client of `config`; `services` (if given) are stopped by close().");
  def_classmethod(
      cls, "remote",
      [](nb::handle kind, nb::handle address, nb::handle timeout, nb::handle polling_mode,
         nb::handle server_public_key_file, nb::handle client_key_file, nb::handle local_copy,
         nb::handle busy_poll_us) {
        nb::object config = nb::type<RemoteConfig>()(address, timeout, polling_mode, server_public_key_file,
                                                     client_key_file, local_copy, busy_poll_us);
        return kind.attr("_connect")(config);
      },
      "cls"_a, "address"_a.none(), nb::kw_only(), "timeout"_a.none() = kDefaultTimeout, "polling_mode"_a.none() = false,
      "server_public_key_file"_a.none() = nb::none(), "client_key_file"_a.none() = nb::none(),
      "local_copy"_a.none() = true, "busy_poll_us"_a.none() = 200,
      nb::sig("def remote(cls, address: str, *, timeout: float = 30.0, polling_mode: bool = False, "
              "server_public_key_file: Optional[str] = None, client_key_file: Optional[str] = None, "
              "local_copy: bool = True, busy_poll_us: int = 200) -> Client"),
      R"(A client of the controller service at `address` (see RemoteConfig).
Raises TimeoutError when the controller or its storage units do not
answer within `timeout`.)");
  def_classmethod(
      cls, "from_config",
      [](nb::handle kind, nb::handle config) {
        static CachedAttribute read_config("seqflow._config", "read_config");
        nb::dict settings = nb::borrow<nb::dict>(read_config(config));
        if (settings.contains("controller.address")) {
          return kind.attr("_connect")(nb::type<RemoteConfig>().attr("from_config")(config));
        }
        return kind(config_setting(settings, "controller.sampler", nb::none()),
                    "polling_mode"_a = config_setting(settings, "controller.polling_mode", nb::bool_(false)),
                    "max_bytes"_a = config_setting(settings, "storage.max_bytes", nb::int_(0)),
                    "max_samples"_a = config_setting(
                        settings, "storage.max_samples",
                        config_setting(settings, "backend.SimpleStorage.total_storage_size", nb::int_(0))),
                    "timeout"_a = config_timeout(settings),
                    "sampler_args"_a = config_setting(settings, "controller.sampler_args", nb::none()),
                    "timing_alignment"_a = config_setting(settings, "controller.timing_alignment", nb::int_(1)));
      },
      "cls"_a, "config"_a.none() = nb::none(), nb::sig("def from_config(cls, config=None) -> Client"),
      R"(TransferQueue's config keys: controller.sampler (instance, class or
name), controller.sampler_args, controller.polling_mode,
controller.timeout (seconds), backend.SimpleStorage.total_storage_size
(samples); seqflow's storage.max_bytes, storage.max_samples and
controller.timing_alignment.
Remote when controller.address is set (see RemoteConfig.from_config);
the sampler and the storage settings belong to the services then.
Every key is checked (see seqflow._config.read_config).)");
  bind_client_calls(cls);
  bind_client_kv(cls);
  // After the methods: each keeps the module that binds it (the typed stubs define them there).
  cls.attr("__module__") = "seqflow.client";

  connect_lock = new_lock();
  python_attribute("os", "register_at_fork")("after_in_child"_a = nb::cpp_function(&after_fork_in_child));
}

}  // namespace seqflow::bindings
