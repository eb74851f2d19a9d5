#include "server/service_settings.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <optional>

#include <zmq.hpp>

#include "seqflow/error.h"

namespace seqflow::server {

namespace {

ServerCurve curve_of(const ServingSettings& settings) {
  return read_server_curve(settings.curve_secret_file, settings.curve_client_files);
}

ServiceOptions service_options(const std::string& bind, size_t max_workers, size_t max_request_bytes,
                               const ServerCurve& curve) {
  ServiceOptions options;
  options.bind = bind;
  if (max_workers > 0) {
    options.max_workers = max_workers;
    options.min_workers = std::min(options.min_workers, max_workers);
  }
  if (max_request_bytes > 0) options.max_request_bytes = max_request_bytes;
  if (curve.enabled) {
    check_curve_key(curve.keys.public_key, "curve.keys.public_key");
    check_curve_key(curve.keys.secret_key, "curve.keys.secret_key");
    for (size_t i = 0; i < curve.allowed_client_keys.size(); ++i) {
      check_curve_key(curve.allowed_client_keys[i], "curve.allowed_client_keys[" + std::to_string(i) + "]");
    }
    options.security.enabled = true;
    options.security.server_keys = curve.keys;
    options.security.allowed_client_keys = curve.allowed_client_keys;
    // The other services of the cluster call in with the shared pair.
    if (!options.security.allowed_client_keys.empty()) {
      options.security.allowed_client_keys.push_back(curve.keys.public_key);
    }
  } else if (!curve.allowed_client_keys.empty()) {
    throw_invalid("curve.allowed_client_keys need curve.enabled and the service's own key pair");
  }
  return options;
}

transport::ClientSecurity client_security(const transport::CurveKeyPair& keys, const std::string& server_public_key) {
  transport::ClientSecurity security;
  security.enabled = true;
  security.client_keys = keys;
  security.server_public_key = server_public_key;
  return security;
}

}  // namespace

transport::CurveKeyPair read_secret_key_file(const std::string& path) {
  transport::CurveKeyPair keys = transport::read_key_file(path);
  if (keys.secret_key.empty()) {
    throw_invalid("CURVE secret key file '" + path +
                  "' holds no secret key; give the .key file that seqflow keygen wrote, not the .pub");
  }
  return keys;
}

// ZeroMQ's certificate-store convention for directories; sorted by name.
std::vector<std::string> read_client_key_files(const std::vector<std::string>& paths) {
  std::vector<std::string> keys;
  for (const std::string& path : paths) {
    std::error_code error;
    if (!std::filesystem::is_directory(path, error)) {
      keys.push_back(transport::read_key_file(path).public_key);
      continue;
    }
    std::vector<std::filesystem::path> files;
    for (std::filesystem::directory_iterator it(path, error), end; !error && it != end; it.increment(error)) {
      if (it->path().extension() == ".pub") files.push_back(it->path());
    }
    if (error) throw_invalid("client key directory '" + path + "' cannot be read: " + error.message());
    if (files.empty()) throw_invalid("client key directory '" + path + "' holds no .pub file");
    std::sort(files.begin(), files.end());
    for (const auto& file : files) keys.push_back(transport::read_key_file(file.string()).public_key);
  }
  return keys;
}

// A connect parses the endpoint and connects in the background, so a
// service that is not up yet is no error. ZeroMQ reads a tcp:// port only
// then, and would retry a bad one forever: it is checked here.
void check_endpoint(const std::string& endpoint, std::string_view parameter) {
  const auto bad = [&](const std::string& why) {
    throw_invalid(std::string(parameter) + " must be a ZeroMQ endpoint such as tcp://10.0.0.1:5555, got '" + endpoint +
                  "': " + why);
  };
  zmq::context_t context(1);
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  try {
    socket.connect(endpoint);
  } catch (const zmq::error_t& error) {
    bad(error.what());
  }
  if (!endpoint.starts_with("tcp://")) return;
  const std::string port_text = endpoint.substr(endpoint.rfind(':') + 1);
  int port = 0;
  const auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (error != std::errc() || end != port_text.data() + port_text.size() || port < 1 || port > 65535) {
    bad("the port must be an integer in 1..65535");
  }
}

ControllerServiceOptions controller_service_options(const ControllerServerOptions& server) {
  if (server.storage_units == 0) throw_invalid("storage_units must be >= 1, got 0");
  ControllerServiceOptions options;
  options.service = service_options(server.bind, server.max_workers, server.max_request_bytes, server.curve);
  // Every blocking get_meta holds a worker while it waits: room for many
  // waiting ranks and the calls that feed them.
  if (server.max_workers == 0) options.service.max_workers = kControllerDefaultMaxWorkers;
  options.controller = server.controller;
  options.storage_units = server.storage_units;
  options.load_checkpoint = server.load_checkpoint;
  options.checkpoint_root = server.checkpoint_root;
  if (server.curve.enabled) options.storage_security = client_security(server.curve.keys, server.curve.keys.public_key);
  return options;
}

ControllerServiceOptions controller_service_options(const ControllerSettings& settings) {
  if (settings.storage_units == 0) throw_invalid("storage_units must be >= 1, got 0");
  ControllerServerOptions server;
  server.bind = settings.serving.bind.empty() ? "tcp://127.0.0.1:5555" : settings.serving.bind;
  server.storage_units = settings.storage_units;
  server.controller = ControllerOptions{settings.sampler, settings.polling_mode, settings.timing_alignment};
  server.max_workers = settings.serving.max_workers;
  server.max_request_bytes = settings.serving.max_request_bytes;
  server.load_checkpoint = settings.load_checkpoint;
  server.checkpoint_root = settings.serving.checkpoint_root;
  server.curve = curve_of(settings.serving);
  return controller_service_options(server);
}

StorageServiceOptions storage_service_options(const StorageServerOptions& server) {
  if (server.controller_endpoint.empty()) {
    throw_invalid(
        "the controller endpoint is empty; a storage unit registers with the controller service "
        "(e.g. tcp://10.0.0.1:5555)");
  }
  // Checked here, not only in the heartbeat thread that connects to it: an
  // error there could only end the process.
  check_endpoint(server.controller_endpoint, "controller_endpoint");
  if (!server.advertise.empty()) check_endpoint(server.advertise, "advertise");
  if (!server.curve.enabled && !server.controller_public_key.empty()) {
    throw_invalid("controller_public_key needs curve.enabled and the storage unit's own key pair");
  }
  if (server.heartbeat.count() <= 0) {
    throw_invalid("heartbeat must be > 0 ms, got " + std::to_string(server.heartbeat.count()) + " ms");
  }
  StorageServiceOptions options;
  options.service = service_options(server.bind, server.max_workers, server.max_request_bytes, server.curve);
  options.storage = server.storage;
  options.controller_endpoint = server.controller_endpoint;
  options.advertise = server.advertise;
  options.checkpoint_root = server.checkpoint_root;
  options.heartbeat = server.heartbeat;
  if (server.curve.enabled) {
    const std::string& controller_key =
        server.controller_public_key.empty() ? server.curve.keys.public_key : server.controller_public_key;
    check_curve_key(controller_key, "controller_public_key");
    options.controller_security = client_security(server.curve.keys, controller_key);
  }
  return options;
}

StorageServiceOptions storage_service_options(const StorageSettings& settings) {
  if (settings.controller.empty()) {
    throw_invalid(
        "the controller endpoint is empty; a storage unit registers with the controller service "
        "(e.g. tcp://10.0.0.1:5555)");
  }
  check_endpoint(settings.controller, "controller");
  if (!settings.advertise.empty()) check_endpoint(settings.advertise, "advertise");
  StorageServerOptions server;
  server.curve = curve_of(settings.serving);
  if (!server.curve.enabled && !settings.controller_key_file.empty()) {
    throw_invalid("controller key file '" + settings.controller_key_file +
                  "' needs the storage unit's own CURVE secret key file for its calls to the controller");
  }
  server.bind = settings.serving.bind.empty() ? "tcp://127.0.0.1:0" : settings.serving.bind;
  server.controller_endpoint = settings.controller;
  server.advertise = settings.advertise;
  server.storage = StorageOptions{settings.max_bytes, settings.max_samples};
  server.max_workers = settings.serving.max_workers;
  server.max_request_bytes = settings.serving.max_request_bytes;
  server.checkpoint_root = settings.serving.checkpoint_root;
  if (!settings.controller_key_file.empty()) {
    server.controller_public_key = transport::read_key_file(settings.controller_key_file).public_key;
  }
  return storage_service_options(server);
}

std::unique_ptr<MetricsHttpServer> serve_metrics(const std::string& address, std::string_view parameter,
                                                 MetricsRegistry& metrics) {
  const auto bad = [&](const std::string& why) {
    throw_invalid(std::string(parameter) + " must be HOST:PORT (e.g. 127.0.0.1:9100), got '" + address + "': " + why);
  };
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) bad("no ':PORT'");
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) bad("no HOST");
  const std::string port_text = address.substr(colon + 1);
  int port = -1;
  const auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (error != std::errc() || end != port_text.data() + port_text.size() || port < 0 || port > 65535) {
    bad("the port must be an integer in 0..65535");
  }
  return std::make_unique<MetricsHttpServer>(host, port, [&metrics] { return metrics.render(); });
}

std::string serving_line(std::string_view role, const std::string& endpoint, const MetricsHttpServer* metrics) {
  std::string line = "seqflow " + std::string(role) + " serving on " + endpoint;
  if (metrics != nullptr) {
    const std::string& host = metrics->host();
    const bool ipv6 = host.find(':') != std::string::npos;
    line += " metrics on http://" + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(metrics->port());
  }
  return line;
}

}  // namespace seqflow::server

namespace seqflow {

ServerCurve read_server_curve(const std::string& secret_key_file, const std::vector<std::string>& client_key_files) {
  ServerCurve curve;
  if (secret_key_file.empty()) {
    if (!client_key_files.empty()) {
      throw_invalid("the allowed client key files ('" + client_key_files.front() +
                    "', ...) need the service's own CURVE secret key file");
    }
    return curve;
  }
  curve.enabled = true;
  curve.keys = server::read_secret_key_file(secret_key_file);
  curve.allowed_client_keys = server::read_client_key_files(client_key_files);
  return curve;
}

}  // namespace seqflow
