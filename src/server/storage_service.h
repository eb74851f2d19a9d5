// A storage unit as a service: a StorageUnit behind a Service that registers
// itself with the controller service (and again every heartbeat, so that a
// restarted controller learns it back). Each registration carries the unit's
// instance id, random per StorageService: a unit that comes back empty on the
// same endpoint has a new one, so the controller knows its data is gone. It
// also carries the controller incarnation the unit's data belongs to: when
// the controller answers with another one (it restarted without a
// checkpoint), the unit drops everything it holds and registers again, so
// nothing from before the restart is ever read.
//
// Same-host clients move data by local_copy, after opening a session
// ("local_copy_session" names the unit's socket; local_copy_session.h): a
// put names the client's frames and its session, and the unit copies them
// out of that session's client; a get naming an open session is answered,
// when large enough, with a description of the reply's frames held under a
// lease, which the client gives back ("release") after copying them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "server/checkpoint_root.h"
#include "transport/frame_leases.h"
#include "transport/local_copy_session.h"
#include "transport/storage_protocol.h"
#include "server/service.h"
#include "seqflow/storage.h"

namespace seqflow::server {

struct StorageServiceOptions {
  ServiceOptions service;
  StorageOptions storage;
  std::string controller_endpoint;  // empty: do not register
  // The endpoint clients reach this unit at; empty: the bound endpoint.
  std::string advertise;
  transport::ClientSecurity controller_security;
  std::chrono::milliseconds heartbeat{1000};
  // How long a get reply's frames wait for a same-host client to copy them
  // (local_copy) before the unit lets them go.
  std::chrono::milliseconds lease_lifetime{60000};
  // Clients' save and load paths must lie under this directory; empty: anywhere.
  std::string checkpoint_root;
};

class StorageService {
 public:
  explicit StorageService(StorageServiceOptions options);
  ~StorageService();

  void start();
  void stop();
  std::string endpoint() const { return service_.endpoint(); }
  std::vector<std::string> ops() const { return service_.ops(); }  // the operations it answers
  MetricsRegistry& metrics() { return service_.metrics(); }
  StorageUnit& storage() { return *storage_; }
  // Random, drawn when this service is made: it names the data this unit holds.
  uint64_t instance_id() const { return instance_id_; }
  // Random, drawn when this service is made, and told only to the controller
  // (in each registration): clear, save and load must carry it, so they are
  // the controller's alone.
  const std::string& admin_token() const { return admin_token_; }
  // The controller incarnation this unit's data belongs to; 0 before the
  // first registration.
  uint64_t incarnation() const { return incarnation_.load(); }

 private:
  void register_handlers();

  // The handlers, one per op of transport/storage_protocol.h; the table in
  // register_handlers says which thread runs each.
  transport::Frames put(transport::Frames& args);
  transport::Frames get(transport::Frames& args);
  transport::Frames commit(transport::Frames& args);
  transport::Frames discard(transport::Frames& args);
  transport::Frames local_copy_session(const transport::Frames& args);
  transport::Frames release(transport::Frames& args);
  transport::Frames clear(transport::Frames& args);
  transport::Frames stats(transport::Frames& args);
  transport::Frames save(transport::Frames& args);
  transport::Frames load(transport::Frames& args);
  transport::Frames room(transport::Frames& args);
  // A commit's or discard's request (`op`), once its write tag is checked.
  transport::storage_protocol::SettleRequest settle_request(transport::Frames& args, std::string_view op) const;

  void run_heartbeat();
  // Throws unless the request (`what`) carries this unit's admin token.
  void check_controller(const std::optional<std::string>& admin_token, std::string_view what) const;
  // Throws kPermissionDenied unless the request carries `version`'s write tag (transport/write_tag.h).
  void check_write_tag(std::optional<uint64_t> write_tag, std::string_view op, uint64_t version) const;

  StorageServiceOptions options_;
  CheckpointRoot checkpoint_root_;
  uint64_t instance_id_;
  std::string admin_token_;
  std::atomic<uint64_t> incarnation_{0};
  std::shared_ptr<StorageUnit> storage_;
  transport::FrameLeases leases_;
  std::unique_ptr<transport::local_copy::SessionListener> sessions_;  // same-host clients
  Service service_;
  Counter* local_put_bytes_ = nullptr;  // bytes copied from same-host clients' memory
  Counter* local_get_bytes_ = nullptr;  // bytes left for same-host clients to copy
  Counter* put_bytes_ = nullptr;        // values' bytes of every put received (sent or copied)
  std::thread heartbeat_;
  std::mutex heartbeat_mutex_;
  std::condition_variable heartbeat_stop_;
  bool stopping_ = false;
};

}  // namespace seqflow::server
