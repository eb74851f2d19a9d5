// seqflow.Client and seqflow.RemoteConfig: the public classes, bound in C++
// (client_bindings.cc: life cycle, pickling, fork; client_calls.cc and
// client_kv.cc: the calls; remote_config.cc: a remote client's settings).
#pragma once

#include <nanobind/nanobind.h>

#include <array>
#include <memory>
#include <string_view>

#include "bindings/gil.h"
#include "seqflow/client.h"

namespace seqflow::bindings {

// How to reach a controller service (seqflow.RemoteConfig), checked.
struct RemoteConfig {
  nanobind::object address;
  double timeout = 30.0;
  bool polling_mode = false;
  nanobind::object server_public_key_file;  // None, or str / os.PathLike
  nanobind::object client_key_file;
  bool local_copy = true;
  int64_t busy_poll_us = 200;
};

// The client of these settings; waits up to their timeout for the controller and its storage units.
std::shared_ptr<Client> connect_remote(const RemoteConfig& config);

// `config` (a RemoteConfig) as the C++ settings; a ValueError naming `parameter` when it is none.
const RemoteConfig& remote_config_of(nanobind::handle config, std::string_view parameter);

// The instance behind seqflow.Client (a Python subclass's too).
class PyClient {
 public:
  PyClient(std::shared_ptr<Client> native, bool polling_mode, double timeout, nanobind::object sampler,
           nanobind::object remote_config, nanobind::object services);
  PyClient(const PyClient&) = delete;
  PyClient& operator=(const PyClient&) = delete;
  ~PyClient();

  // The client to call: RuntimeError once closed; a remote client that has
  // none yet (after fork, unpickled) connects here.
  std::shared_ptr<Client> connected();
  bool is_remote() const { return !remote_config.is_none(); }
  bool polling_mode() { return connected(), polling_mode_; }
  void close();
  // After fork in a child: the parent's sockets are left alone, the next call connects anew.
  void abandon();
  // For the garbage collector: the Python objects held, and dropping them.
  std::array<nanobind::handle, 3> held_objects() const;
  void release_objects();

  double timeout;
  nanobind::object sampler;
  nanobind::object remote_config;  // None: embedded

 private:
  std::shared_ptr<Client> native_;  // null: closed, or (remote) not connected yet
  bool connect_on_use_ = false;
  bool polling_mode_;
  nanobind::object services_;  // the Ray services this client started, stopped by close()
};

// The client's allow_pickle attribute, or `allow_pickle` checked when given.
bool pickle_allowed(PyClient& self, nanobind::handle allow_pickle);

// seqflow.batch_meta's BatchMeta and KVBatchMeta, whichever implementation the module holds.
nanobind::handle batch_meta_class();
nanobind::handle kv_batch_meta_class();
// BatchMeta._from_native(native, extra_info).
nanobind::object python_meta(BatchMeta&& native, nanobind::handle extra_info = nanobind::none());

// f() without the GIL (an engine call); its result is made before the GIL comes back.
template <typename Function>
auto without_gil(Function&& function) {
  GilReleased release;
  return function();
}

// settings[key] of a read config, or `fallback`.
nanobind::object config_setting(const nanobind::dict& settings, const char* key, nanobind::handle fallback);

// A read config's timeout (or controller.timeout), 30 seconds by default.
nanobind::object config_timeout(const nanobind::dict& settings);

// Client.get_data (kv_batch_get reads through it too).
nanobind::object get_data(PyClient& self, nanobind::handle metadata, nanobind::handle fields, nanobind::handle format,
                          nanobind::handle copy, nanobind::handle layout, nanobind::handle allow_pickle);

using ClientClass = nanobind::class_<PyClient>;
void bind_client_class(nanobind::module_ m);
void bind_client_calls(ClientClass& cls);
void bind_client_kv(ClientClass& cls);
void bind_remote_config(nanobind::module_ m);

}  // namespace seqflow::bindings
