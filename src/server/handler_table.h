// A service's handler table: each op bound to a member function of the
// object that serves it, one line per op, saying on which thread it runs.
#pragma once

#include <optional>
#include <string_view>

#include "server/service.h"
#include "transport/frames.h"

namespace seqflow::server {

template <class Owner>
class HandlerTable {
 public:
  // Run by a worker: it may wait (I/O, a lock held for long).
  using OnWorker = transport::Frames (Owner::*)(transport::Frames& args);
  // Run on the I/O thread: it finishes in microseconds and never waits.
  using OnIoThread = transport::Frames (Owner::*)(const transport::Frames& args);
  // Tried on the I/O thread with may_wait false, where nullopt passes the
  // request to a worker, which runs it again with may_wait true (and must
  // then answer; an empty optional there is a defect of the handler).
  using IoThenWorker = std::optional<transport::Frames> (Owner::*)(const transport::Frames& args, bool may_wait);

  HandlerTable(Service& service, Owner& owner) : service_(service), owner_(owner) {}

  void on_worker(std::string_view op, OnWorker method) { service_.handle(op, worker(method)); }
  void on_io_thread(std::string_view op, OnIoThread method) {
    service_.handle(op, nullptr,
                    [&owner = owner_, method](const transport::Frames& args) { return (owner.*method)(args); });
  }
  void io_then_worker(std::string_view op, IoThenWorker method) {
    service_.handle(
        op, [&owner = owner_, method](transport::Frames& args) { return *(owner.*method)(args, true); },
        [&owner = owner_, method](const transport::Frames& args) { return (owner.*method)(args, false); });
  }
  // Only the cluster's services may call it (Service::handle_services_only).
  void services_only_on_worker(std::string_view op, OnWorker method) {
    service_.handle_services_only(op, worker(method));
  }

 private:
  Handler worker(OnWorker method) {
    return [&owner = owner_, method](transport::Frames& args) { return (owner.*method)(args); };
  }

  Service& service_;
  Owner& owner_;
};

}  // namespace seqflow::server
