// A storage unit as a service: a StorageUnit behind a Service that registers
// itself with the controller service (and again every heartbeat, so that a
// restarted controller learns it back). Each registration carries the unit's
// instance id, random per StorageService: a unit that comes back empty on the
// same endpoint has a new one, so the controller knows its data is gone.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "net/service.h"
#include "seqflow/storage.h"

namespace seqflow::net {

struct StorageServiceOptions {
  ServiceOptions service;
  StorageOptions storage;
  std::string controller_endpoint;  // empty: do not register
  // The endpoint clients reach this unit at; empty: the bound endpoint.
  std::string advertise;
  ClientSecurity controller_security;
  std::chrono::milliseconds heartbeat{1000};
};

class StorageService {
 public:
  explicit StorageService(StorageServiceOptions options);
  ~StorageService();

  void start();
  void stop();
  std::string endpoint() const { return service_.endpoint(); }
  MetricsRegistry& metrics() { return service_.metrics(); }
  StorageUnit& storage() { return *storage_; }
  // Random, drawn when this service is made: it names the data this unit holds.
  uint64_t instance_id() const { return instance_id_; }

 private:
  void register_handlers();
  void run_heartbeat();

  StorageServiceOptions options_;
  uint64_t instance_id_;
  std::shared_ptr<StorageUnit> storage_;
  Service service_;
  std::thread heartbeat_;
  std::mutex heartbeat_mutex_;
  std::condition_variable heartbeat_stop_;
  bool stopping_ = false;
};

}  // namespace seqflow::net
