// A controller service and storage services on loopback ports, in this
// process: the same code the `seqflow serve` processes run. Shared by the
// client tests, the service robustness tests and the remote benchmark, so it
// uses no test framework.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "server/controller_service.h"
#include "server/storage_service.h"
#include "seqflow/client.h"

namespace seqflow::test {

class RemoteCluster {
 public:
  // Units register every 100 ms, so a client finds them all almost at once
  // and a restarted controller learns them back quickly.
  static constexpr std::chrono::milliseconds kHeartbeat{100};

  explicit RemoteCluster(size_t unit_count, StorageOptions storage = {},
                         server::ControllerServiceOptions controller_options = {},
                         std::chrono::milliseconds lease_lifetime = server::StorageServiceOptions{}.lease_lifetime)
      : storage_(storage), controller_options_(std::move(controller_options)), lease_lifetime_(lease_lifetime) {
    controller_options_.storage_units = unit_count;
    // The tests' checkpoints lie in the system's temporary directory.
    if (controller_options_.checkpoint_root.empty()) controller_options_.checkpoint_root = checkpoint_root();
    controller_ = std::make_unique<server::ControllerService>(controller_options_);
    controller_->start();
    controller_endpoint_ = controller_->endpoint();
    for (size_t u = 0; u < unit_count; ++u) units_.push_back(start_unit("tcp://127.0.0.1:0"));
  }

  server::ControllerService& controller() { return *controller_; }
  const std::string& controller_endpoint() const { return controller_endpoint_; }
  size_t unit_count() const { return units_.size(); }
  server::StorageService& unit(size_t u) { return *units_.at(u); }

  // Drops of released samples that a unit did not confirm: the controller
  // gave them up after its storage_timeout (the unit was down) and owes them.
  double drop_failures() { return controller_->metrics().counter("seqflow_storage_drop_failures_total", "").value(); }

  // Unit u stops (its data goes with it) and comes back empty on the same
  // endpoint, as after a process restart.
  void stop_unit(size_t u) { units_.at(u)->stop(); }
  void restart_unit(size_t u) {
    const std::string endpoint = units_.at(u)->endpoint();
    units_.at(u).reset();
    units_.at(u) = start_unit(endpoint);
  }

  // The controller stops and comes back on its endpoint from `checkpoint`
  // (a directory written by Client::save_checkpoint).
  void restart_controller(const std::string& checkpoint) {
    controller_.reset();
    server::ControllerServiceOptions options = controller_options_;
    options.service.bind = controller_endpoint_;
    options.load_checkpoint = checkpoint;
    controller_ = std::make_unique<server::ControllerService>(options);
    controller_->start();
  }

  // Waits until every unit has registered with the controller.
  std::shared_ptr<Client> client(std::chrono::milliseconds timeout = std::chrono::seconds(20), bool local_copy = true,
                                 std::chrono::microseconds busy_poll = RemoteOptions{}.busy_poll) const {
    RemoteOptions options;
    options.controller_endpoint = controller_endpoint_;
    options.timeout = timeout;
    options.local_copy = local_copy;
    options.busy_poll = busy_poll;
    return make_remote_client(options);
  }

 private:
  static std::string checkpoint_root() { return std::filesystem::temp_directory_path().string(); }

  std::unique_ptr<server::StorageService> start_unit(const std::string& bind) const {
    server::StorageServiceOptions options;
    options.service.bind = bind;
    options.storage = storage_;
    options.controller_endpoint = controller_endpoint_;
    options.heartbeat = kHeartbeat;
    options.lease_lifetime = lease_lifetime_;
    options.checkpoint_root = checkpoint_root();
    auto unit = std::make_unique<server::StorageService>(options);
    unit->start();
    return unit;
  }

  StorageOptions storage_;
  server::ControllerServiceOptions controller_options_;
  std::chrono::milliseconds lease_lifetime_;
  std::string controller_endpoint_;
  std::unique_ptr<server::ControllerService> controller_;
  std::vector<std::unique_ptr<server::StorageService>> units_;
};

}  // namespace seqflow::test
