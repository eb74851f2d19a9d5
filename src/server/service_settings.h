// What a user says to run a controller or storage service, in one place for
// every frontend (`seqflow serve`, seqflow.serve_controller/serve_storage in
// Python): the settings, the service options they mean (CURVE keys read from
// key files), the metrics endpoint and the line that announces the service.
//
// CURVE in a cluster: one key pair shared by the controller and the storage
// units (`seqflow keygen --cluster DIR`). Each service serves with it; a
// storage unit registers with the controller and the controller drops
// released data on the units as clients holding that same pair, so a service
// always admits its own public key, as the "service" role that alone may
// call the services' own operations. Clients need cluster.pub as the server
// key (the same for the controller and every unit) and a key pair of their
// own, listed: a CURVE service without an allow-list refuses to start.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/controller_service.h"
#include "server/metrics_http.h"
#include "server/storage_service.h"
#include "seqflow/server.h"

namespace seqflow::server {

// Settings both services take. Empty or zero: the default.
struct ServingSettings {
  std::string bind;  // controller: tcp://127.0.0.1:5555; storage: tcp://127.0.0.1:0 (a free port)
  size_t max_workers = 0;
  size_t max_request_bytes = 0;
  std::string curve_secret_file;                // a .key file; empty: plaintext
  std::vector<std::string> curve_client_files;  // .pub files or directories of them; needed with curve_secret_file
  // A cluster key directory (read_cluster_curve) instead of the two above;
  // its metrics.token then guards the metrics endpoint.
  std::string curve_keys_dir;
  std::string checkpoint_root;  // clients save and load only under it; empty: the default (CheckpointRoot)
};

struct ControllerSettings {
  ServingSettings serving;
  size_t storage_units = 1;
  std::shared_ptr<Sampler> sampler;  // null: sequential
  bool polling_mode = false;
  int64_t timing_alignment = 1;               // ControllerOptions::timing_alignment
  std::string load_checkpoint;                // empty: start empty
  std::chrono::milliseconds insert_lease{0};  // ControllerServiceOptions::insert_lease
};

struct StorageSettings {
  ServingSettings serving;
  std::string controller;  // the controller service's endpoint
  std::string advertise;   // empty: the bound endpoint
  StorageOptions storage;  // capacity: limits, when_full, watermarks
  // The controller's public key (.pub or .key); empty: the unit's own, as
  // with one cluster key pair. Needs curve_secret_file.
  std::string controller_key_file;
};

// Throw seqflow::Error naming the setting and its value (kInvalidArgument)
// or the key file that cannot be read (kNotFound).
ControllerServiceOptions controller_service_options(const ControllerSettings& settings);
StorageServiceOptions storage_service_options(const StorageSettings& settings);

// The service options of a server's public options (seqflow/server.h), with
// keys instead of key files: the settings above are read into these, and
// every check of the options is here. Throw kInvalidArgument naming the
// option and its value.
ControllerServiceOptions controller_service_options(const ControllerServerOptions& options);
StorageServiceOptions storage_service_options(const StorageServerOptions& options);

// The steps of the two above that read files or parse endpoints, for a
// frontend that names its own options in their errors (`seqflow serve`).
// A service's own key pair: a .key file (a .pub file cannot serve).
transport::CurveKeyPair read_secret_key_file(const std::string& path);
// The public keys of .pub files and of every *.pub file in directories.
std::vector<std::string> read_client_key_files(const std::vector<std::string>& paths);
// Throws kInvalidArgument naming `parameter` unless ZeroMQ can connect to
// `endpoint` (e.g. tcp://10.0.0.1:5555); nothing needs to listen there yet.
void check_endpoint(const std::string& endpoint, std::string_view parameter);

// The Prometheus endpoint of a service's metrics at "HOST:PORT" (port 0: a
// free port); a non-empty `token` is required as "Authorization: Bearer
// TOKEN" by GET /metrics. Throws kInvalidArgument naming `parameter` and the
// address.
std::unique_ptr<MetricsHttpServer> serve_metrics(const std::string& address, std::string_view parameter,
                                                 MetricsRegistry& metrics, const std::string& token = "");

// The token of settings.curve_keys_dir (read_metrics_token); empty without one.
std::string metrics_token_of(const ServingSettings& settings);

// The error a CURVE service without a client allow-list gets.
[[noreturn]] void throw_no_allow_list();

// `seqflow keygen --cluster DIR`: DIR/cluster.key and cluster.pub (the
// services' pair), DIR/clients/NAME.key and NAME.pub for each client name
// (DIR/clients is mode 0700) and DIR/metrics.token (32 random bytes as hex,
// mode 0600). Without `overwrite` an existing cluster pair and token are
// kept (new clients join it) and an existing client pair is an error.
// Returns the paths written.
std::vector<std::string> write_cluster_directory(const std::string& directory,
                                                 const std::vector<std::string>& client_names, bool overwrite);

// "seqflow controller serving on tcp://127.0.0.1:5555[ metrics on
// http://127.0.0.1:9100]": scripts and tests read the bound port from it.
std::string serving_line(std::string_view role, const std::string& endpoint, const MetricsHttpServer* metrics);

}  // namespace seqflow::server
