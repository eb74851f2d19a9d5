// make_remote_client: the coordinating client over a controller service and
// the storage services it names.
#include <zmq.hpp>

#include "client/coordinating_client.h"
#include "client/remote_control_plane.h"
#include "client/sharded_storage.h"
#include "transport/connection.h"
#include "seqflow/error.h"

namespace seqflow {

std::shared_ptr<Client> make_remote_client(const RemoteOptions& options) {
  if (options.controller_endpoint.empty()) throw_invalid("controller_endpoint is empty; name the controller service");
  if (options.timeout.count() <= 0) {
    throw_invalid("timeout must be positive, got " + std::to_string(options.timeout.count()) + " ms");
  }
  transport::ConnectionOptions connection;
  connection.timeout = options.timeout;
  transport::check_busy_poll(options.busy_poll, "busy_poll");
  connection.busy_poll = options.busy_poll;
  const bool curve =
      !options.server_public_key.empty() || !options.client_public_key.empty() || !options.client_secret_key.empty();
  if (curve) {
    transport::check_curve_key(options.server_public_key, "server_public_key");
    transport::check_curve_key(options.client_public_key, "client_public_key");
    transport::check_curve_key(options.client_secret_key, "client_secret_key");
    connection.security.enabled = true;
    connection.security.server_public_key = options.server_public_key;
    connection.security.client_keys = {options.client_public_key, options.client_secret_key};
  }
  auto context = std::make_shared<zmq::context_t>(1);
  auto controller = std::make_shared<transport::ConnectionPool>(context, options.controller_endpoint, connection);
  auto control = std::make_shared<RemoteControlPlane>(controller, options.timeout);
  std::vector<std::shared_ptr<transport::ConnectionPool>> units;
  // Data calls do not spin: they are long enough to pay for a wake-up.
  connection.busy_poll = std::chrono::microseconds(0);
  control->hello();  // before anything else: a controller of another seqflow version fails here, clearly
  for (const std::string& endpoint : control->storage_units()) {
    units.push_back(std::make_shared<transport::ConnectionPool>(context, endpoint, connection));
  }
  auto storage = std::make_shared<ShardedStorage>(std::move(units), controller, options.local_copy);
  // One cut: the controller saves itself and its units while it holds writes.
  auto save_parts = [storage](const std::string& controller_path, const std::string& storage_path) {
    storage->save_with_controller(controller_path, storage_path);
  };
  return std::make_shared<CoordinatingClient>(control, storage, ReleasedData::kDroppedByControlPlane, options.timeout,
                                              save_parts);
}

}  // namespace seqflow
