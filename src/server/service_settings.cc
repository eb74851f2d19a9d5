#include "server/service_settings.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <optional>

#include <zmq.hpp>

#include "seqflow/error.h"

namespace seqflow::server {

namespace {

// The service's own key pair, when it serves with CURVE.
std::optional<transport::CurveKeyPair> own_keys(const ServingSettings& settings) {
  if (settings.curve_secret_file.empty()) {
    if (!settings.curve_client_files.empty()) {
      throw_invalid("the allowed client key files ('" + settings.curve_client_files.front() +
                    "', ...) need the service's own CURVE secret key file");
    }
    return std::nullopt;
  }
  return read_secret_key_file(settings.curve_secret_file);
}

ServiceOptions service_options(const ServingSettings& settings, std::string_view default_bind,
                               const std::optional<transport::CurveKeyPair>& keys) {
  ServiceOptions options;
  options.bind = settings.bind.empty() ? std::string(default_bind) : settings.bind;
  if (settings.max_workers > 0) {
    options.max_workers = settings.max_workers;
    options.min_workers = std::min(options.min_workers, settings.max_workers);
  }
  if (settings.max_request_bytes > 0) options.max_request_bytes = settings.max_request_bytes;
  if (keys) {
    options.security.enabled = true;
    options.security.server_keys = *keys;
    options.security.allowed_client_keys = read_client_key_files(settings.curve_client_files);
    // The other services of the cluster call in with the shared pair.
    if (!options.security.allowed_client_keys.empty()) {
      options.security.allowed_client_keys.push_back(keys->public_key);
    }
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

ControllerServiceOptions controller_service_options(const ControllerSettings& settings) {
  if (settings.storage_units == 0) throw_invalid("storage_units must be >= 1, got 0");
  const std::optional<transport::CurveKeyPair> keys = own_keys(settings.serving);
  ControllerServiceOptions options;
  options.service = service_options(settings.serving, "tcp://127.0.0.1:5555", keys);
  // Every blocking get_meta holds a worker while it waits: room for many
  // waiting ranks and the calls that feed them.
  if (settings.serving.max_workers == 0) options.service.max_workers = kControllerDefaultMaxWorkers;
  options.controller = ControllerOptions{settings.sampler, settings.polling_mode};
  options.storage_units = settings.storage_units;
  options.load_checkpoint = settings.load_checkpoint;
  options.checkpoint_root = settings.serving.checkpoint_root;
  if (keys) options.storage_security = client_security(*keys, keys->public_key);
  return options;
}

StorageServiceOptions storage_service_options(const StorageSettings& settings) {
  if (settings.controller.empty()) {
    throw_invalid(
        "the controller endpoint is empty; a storage unit registers with the controller service "
        "(e.g. tcp://10.0.0.1:5555)");
  }
  // Checked here, not only in the heartbeat thread that connects to it: an
  // error there could only end the process.
  check_endpoint(settings.controller, "controller");
  if (!settings.advertise.empty()) check_endpoint(settings.advertise, "advertise");
  const std::optional<transport::CurveKeyPair> keys = own_keys(settings.serving);
  if (!keys && !settings.controller_key_file.empty()) {
    throw_invalid("controller key file '" + settings.controller_key_file +
                  "' needs the storage unit's own CURVE secret key file for its calls to the controller");
  }
  StorageServiceOptions options;
  options.service = service_options(settings.serving, "tcp://127.0.0.1:0", keys);
  options.storage = StorageOptions{settings.max_bytes, settings.max_samples};
  options.controller_endpoint = settings.controller;
  options.advertise = settings.advertise;
  options.checkpoint_root = settings.serving.checkpoint_root;
  if (keys) {
    const std::string controller_key = settings.controller_key_file.empty()
                                           ? keys->public_key
                                           : transport::read_key_file(settings.controller_key_file).public_key;
    options.controller_security = client_security(*keys, controller_key);
  }
  return options;
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
