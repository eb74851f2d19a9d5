#include "server/service_settings.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include <zmq.hpp>

#include "seqflow/error.h"
#include "common/random_id.h"

namespace seqflow::server {

namespace {

ServerCurve curve_of(const ServingSettings& settings) {
  if (!settings.curve_keys_dir.empty()) {
    if (!settings.curve_secret_file.empty() || !settings.curve_client_files.empty()) {
      throw_invalid("curve keys directory '" + settings.curve_keys_dir +
                    "' replaces the CURVE secret key file and the client key files: give one or the other");
    }
    return read_cluster_curve(settings.curve_keys_dir);
  }
  return read_server_curve(settings.curve_secret_file, settings.curve_client_files);
}

void check_client_name(const std::string& name) {
  const bool ok = !name.empty() && name != "." && name != ".." && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  if (!ok) throw_invalid("client name '" + name + "' must be letters, digits, '-', '_' or '.' (a file name)");
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
    if (curve.allowed_client_keys.empty()) throw_no_allow_list();
    for (size_t i = 0; i < curve.allowed_client_keys.size(); ++i) {
      check_curve_key(curve.allowed_client_keys[i], "curve.allowed_client_keys[" + std::to_string(i) + "]");
    }
    // The other services of the cluster call in with the shared pair, which
    // the service admits as its own (the "service" role).
    options.security.enabled = true;
    options.security.server_keys = curve.keys;
    options.security.allowed_client_keys = curve.allowed_client_keys;
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
  if (server.max_workers == 0) options.service.max_workers = kControllerDefaultMaxWorkers;
  if (server.insert_lease.count() < 0) {
    throw_invalid("insert_lease must be >= 0 ms (0: each put's timeout), got " +
                  std::to_string(server.insert_lease.count()) + " ms");
  }
  options.insert_lease = server.insert_lease;
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
  server.insert_lease = settings.insert_lease;
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
    // A controller with its own key pair calls the unit as a service.
    if (controller_key != server.curve.keys.public_key) options.service.security.service_keys.push_back(controller_key);
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
  server.storage = settings.storage;
  server.max_workers = settings.serving.max_workers;
  server.max_request_bytes = settings.serving.max_request_bytes;
  server.checkpoint_root = settings.serving.checkpoint_root;
  if (!settings.controller_key_file.empty()) {
    server.controller_public_key = transport::read_key_file(settings.controller_key_file).public_key;
  }
  return storage_service_options(server);
}

std::unique_ptr<MetricsHttpServer> serve_metrics(const std::string& address, std::string_view parameter,
                                                 MetricsRegistry& metrics, const std::string& token) {
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
  return std::make_unique<MetricsHttpServer>(
      host, port, [&metrics] { return metrics.render(); }, token);
}

std::string metrics_token_of(const ServingSettings& settings) {
  return settings.curve_keys_dir.empty() ? "" : read_metrics_token(settings.curve_keys_dir);
}

void throw_no_allow_list() {
  throw_invalid(
      "a CURVE service needs a client allow-list (curve.allowed_client_keys): list the client .pub files with "
      "--curve-clients (Python: curve_clients), or serve with one cluster key directory, --curve-keys DIR "
      "(curve_keys; seqflow keygen --cluster DIR); without one any key pair could call the service");
}

std::vector<std::string> write_cluster_directory(const std::string& directory,
                                                 const std::vector<std::string>& client_names, bool overwrite) {
  namespace fs = std::filesystem;
  for (const std::string& name : client_names) check_client_name(name);
  const fs::path dir(directory);
  const fs::path clients = dir / "clients";
  const auto exists = [](const fs::path& path) {
    std::error_code error;
    return fs::exists(path, error);
  };
  const bool keep_cluster = !overwrite && exists(dir / "cluster.key");
  if (keep_cluster && client_names.empty()) {
    throw_invalid("cluster key directory '" + directory +
                  "' holds cluster.key already; name new clients with --clients, or pass --force to replace it");
  }
  if (!overwrite) {
    for (const std::string& name : client_names) {
      const fs::path key = clients / (name + ".key");
      if (exists(key) || exists(clients / (name + ".pub"))) {
        throw_invalid("client '" + name + "': " + key.string() + " exists; pass --force to replace it");
      }
    }
  }
  const auto make_directory = [](const fs::path& path) {
    std::error_code error;
    if (fs::create_directories(path, error)) {
      fs::permissions(path, fs::perms::owner_all, fs::perm_options::replace, error);
    }
    if (error || !fs::is_directory(path)) {
      throw_invalid("directory '" + path.string() + "' cannot be made" + (error ? ": " + error.message() : ""));
    }
  };
  make_directory(dir);
  std::vector<std::string> written;
  if (!keep_cluster) {
    transport::write_key_files((dir / "cluster").string(), transport::generate_curve_keys());
    transport::write_key_file((dir / "metrics.token").string(), random_hex_token<32>() + "\n", 0600, "metrics token");
    written.insert(written.end(),
                   {(dir / "cluster.key").string(), (dir / "cluster.pub").string(), (dir / "metrics.token").string()});
  }
  if (!client_names.empty()) make_directory(clients);
  for (const std::string& name : client_names) {
    const std::string prefix = (clients / name).string();
    transport::write_key_files(prefix, transport::generate_curve_keys());
    written.insert(written.end(), {prefix + ".key", prefix + ".pub"});
  }
  return written;
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

ServerCurve read_cluster_curve(const std::string& directory) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(directory, error)) {
    throw Error(ErrorCode::kNotFound,
                "curve keys directory '" + directory + "' is not a directory; seqflow keygen --cluster DIR writes one");
  }
  const fs::path dir(directory);
  ServerCurve curve;
  curve.enabled = true;
  curve.keys = server::read_secret_key_file((dir / "cluster.key").string());
  const std::string cluster_pub = (dir / "cluster.pub").string();
  if (transport::read_key_file(cluster_pub).public_key != curve.keys.public_key) {
    throw_invalid("curve keys directory '" + directory + "': cluster.pub is not the public key of cluster.key");
  }
  curve.allowed_client_keys = {curve.keys.public_key};
  const fs::path clients = dir / "clients";
  if (fs::is_directory(clients, error)) {
    std::vector<fs::path> files;
    for (fs::directory_iterator it(clients, error), end; !error && it != end; it.increment(error)) {
      if (it->path().extension() == ".pub") files.push_back(it->path());
    }
    if (error) throw_invalid("client key directory '" + clients.string() + "' cannot be read: " + error.message());
    std::sort(files.begin(), files.end());
    for (const auto& file : files)
      curve.allowed_client_keys.push_back(transport::read_key_file(file.string()).public_key);
  }
  return curve;
}

std::string read_metrics_token(const std::string& directory) {
  const std::string path = (std::filesystem::path(directory) / "metrics.token").string();
  std::ifstream in(path);
  if (!in) {
    throw Error(ErrorCode::kNotFound, "metrics token file '" + path + "' cannot be opened: " + std::strerror(errno) +
                                          "; seqflow keygen --cluster DIR writes one");
  }
  std::string token;
  std::getline(in, token);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.empty()) throw_invalid("metrics token file '" + path + "' is empty");
  return token;
}

}  // namespace seqflow
