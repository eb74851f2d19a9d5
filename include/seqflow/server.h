// The controller and storage services in this process: what `seqflow serve`
// runs, for tests, benchmarks and jobs on one host. Clients reach them with
// make_remote_client (client.h) at endpoint(). Each server starts in its
// constructor and stops in stop() or its destructor.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "seqflow/controller.h"
#include "seqflow/security.h"
#include "seqflow/storage.h"

namespace seqflow {

// CURVE on a service. A cluster shares one key pair: the controller and
// every storage unit serve with it and call each other with it; clients
// give its public key as RemoteOptions::server_public_key. The cluster's
// own key is the "service" role: only it may call the services' own
// operations (a unit registering with the controller); every other listed
// key is a client.
struct ServerCurve {
  bool enabled = false;
  CurveKeyPair keys;  // both keys
  // Z85 public keys of the clients let in. With `enabled` at least one: a
  // server refuses to start with CURVE and no allow-list (any key pair could
  // call it).
  std::vector<std::string> allowed_client_keys;
};

// A service's CURVE settings from key files, as `seqflow serve` takes them:
// its own .key file (empty: plaintext) and the .pub files, or directories of
// them, of the clients let in. Throws seqflow::Error naming the file
// (kNotFound when it cannot be opened, kInvalidArgument when it is not the
// kind of key file asked for).
ServerCurve read_server_curve(const std::string& secret_key_file, const std::vector<std::string>& client_key_files);

// The CURVE settings of one cluster key directory, as `seqflow keygen
// --cluster DIR` writes it and `seqflow serve --curve-keys DIR` reads it:
// DIR/cluster.key serves, DIR/cluster.pub and every DIR/clients/*.pub are
// let in. Throws kNotFound naming DIR or the file that is missing.
ServerCurve read_cluster_curve(const std::string& directory);
// DIR/metrics.token: the bearer token the metrics endpoint of a service
// serving with DIR requires (see metrics_token below). Throws kNotFound
// naming the file when it is missing, kInvalidArgument when it is empty.
std::string read_metrics_token(const std::string& directory);

struct ControllerServerOptions {
  std::string bind = "tcp://127.0.0.1:0";  // port 0: a free port (endpoint() tells which)
  // Clients wait until this many storage units have registered.
  size_t storage_units = 1;
  ControllerOptions controller;  // sampler, polling mode, timing alignment
  size_t max_workers = 0;        // 0: the default (256; blocking fetches wait without one)
  size_t max_request_bytes = 0;  // 0: the default (8 GiB)
  std::string load_checkpoint;   // a checkpoint directory to start from; empty: start empty
  // Samples a put inserted and did not mark produced within this long (its
  // producer died mid-put) are reclaimed; 0: each put's timeout plus 2 s.
  std::chrono::milliseconds insert_lease{0};
  // Clients save and load only under it; empty: $SEQFLOW_CHECKPOINT_ROOT, else
  // ~/.local/state/seqflow/checkpoints (made 0700).
  std::string checkpoint_root;
  ServerCurve curve;
  std::string metrics_address;  // Prometheus endpoint "HOST:PORT" (port 0: a free port); empty: none
  // GET /metrics then requires "Authorization: Bearer <metrics_token>" (401
  // otherwise; /health stays open); empty: open. See read_metrics_token.
  std::string metrics_token;
};

class ControllerServer {
 public:
  // Binds and starts. Throws kInvalidArgument naming a bad option and its
  // value (kNotFound for a checkpoint that is not there).
  explicit ControllerServer(ControllerServerOptions options);
  ~ControllerServer();
  ControllerServer(const ControllerServer&) = delete;
  ControllerServer& operator=(const ControllerServer&) = delete;

  // The bound endpoint, e.g. tcp://127.0.0.1:40123 (the same after stop(),
  // so a new server can bind it again).
  std::string endpoint() const;
  // http://HOST:PORT/metrics; empty without metrics_address.
  std::string metrics_url() const;
  // Idempotent: stops taking requests, finishes running ones, joins threads.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct StorageServerOptions {
  std::string bind = "tcp://127.0.0.1:0";  // port 0: a free port
  std::string controller_endpoint;         // the controller service this unit registers with
  std::string advertise;                   // the endpoint clients reach this unit at; empty: the bound one
  StorageOptions storage;                  // capacity
  size_t max_workers = 0;                  // 0: the default
  size_t max_request_bytes = 0;            // 0: the default (8 GiB)
  std::string checkpoint_root;             // clients save and load only under it; empty: the default
  ServerCurve curve;
  // The controller's public key; empty: curve.keys.public_key (one cluster pair).
  std::string controller_public_key;
  // How often the unit registers with the controller (a restarted
  // controller learns it back within this).
  std::chrono::milliseconds heartbeat{1000};
  std::string metrics_address;  // as for the controller
  std::string metrics_token;    // as for the controller
};

class StorageServer {
 public:
  explicit StorageServer(StorageServerOptions options);  // throws as ControllerServer does
  ~StorageServer();
  StorageServer(const StorageServer&) = delete;
  StorageServer& operator=(const StorageServer&) = delete;

  std::string endpoint() const;
  std::string metrics_url() const;
  // The samples and bytes this unit holds.
  StorageStats stats() const;
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace seqflow
