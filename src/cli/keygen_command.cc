// seqflow keygen: a CURVE key pair for remote mode, as PREFIX.key and
// PREFIX.pub, or a cluster key directory (--cluster DIR).
#include <filesystem>
#include <iostream>

#include "cli/args.h"
#include "cli/commands.h"
#include "server/service_settings.h"
#include "transport/security.h"
#include "seqflow/error.h"

namespace seqflow::cli {

namespace {

constexpr Option kOptions[] = {
    {"PREFIX", "", "path prefix of the files to write: PREFIX.key and PREFIX.pub"},
    {"--cluster", "DIR",
     "write a cluster key directory instead: DIR/cluster.key and cluster.pub (the key pair of the "
     "controller and every storage unit), DIR/metrics.token (the metrics endpoint's bearer token) and a "
     "key pair DIR/clients/NAME.key and NAME.pub for each --clients name; serve with --curve-keys DIR. "
     "An existing cluster pair is kept: new --clients join it"},
    {"--clients", "NAME,...", "with --cluster: the clients' names (e.g. trainer,rollout)"},
    {"--force", "", "replace existing files (the old key pairs are lost)"},
};

constexpr CommandSpec kSpec{
    "keygen",
    "keygen PREFIX [--force] | keygen --cluster DIR [--clients NAME,...] [--force]",
    "Generate a CURVE key pair: PREFIX.key holds the public and the secret key\n"
    "(mode 0600; keep it private), PREFIX.pub only the public key (hand it to\n"
    "peers). Both are in ZeroMQ's certificate format. With --cluster, every key a\n"
    "cluster needs in one directory.",
    kOptions,
    "Start the controller and every storage unit with --curve-keys DIR; a client\n"
    "gives DIR/cluster.pub as the server key and its own DIR/clients/NAME.key.",
    "seqflow keygen --cluster keys --clients trainer,rollout",
};

std::vector<std::string> names_of(const std::string& text) {
  std::vector<std::string> names;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    names.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (names.back().empty()) throw_invalid("--clients has an empty entry in '" + text + "'");
    if (comma == std::string::npos) return names;
    start = comma + 1;
  }
}

}  // namespace

int run_keygen(std::span<const std::string> arguments) {
  const std::optional<Arguments> args = parse_arguments(arguments, kSpec);
  if (!args) return 0;
  if (const std::optional<std::string> cluster = args->get("--cluster")) {
    if (!args->positionals().empty()) {
      throw_invalid("keygen --cluster DIR takes no PREFIX, got '" + args->positionals().front() + "'");
    }
    const std::vector<std::string> clients =
        args->has("--clients") ? names_of(*args->get("--clients")) : std::vector<std::string>{};
    const std::vector<std::string> written = with_option(
        "--cluster", [&] { return server::write_cluster_directory(*cluster, clients, args->has("--force")); });
    for (const std::string& path : written) std::cout << "wrote " << path << "\n";
    std::cout << "serve with --curve-keys " << *cluster << "; keep the .key files and metrics.token private\n";
    return 0;
  }
  if (args->has("--clients")) throw_invalid("--clients needs --cluster DIR");
  if (args->positionals().size() != 1) {
    throw_invalid("keygen takes one PREFIX, got " + std::to_string(args->positionals().size()) +
                  " arguments; see 'seqflow keygen --help'");
  }
  const std::string& prefix = args->positionals().front();
  if (!args->has("--force")) {
    for (const std::string& path : {prefix + ".key", prefix + ".pub"}) {
      std::error_code error;
      if (std::filesystem::exists(path, error)) {
        throw_invalid("PREFIX '" + prefix + "': " + path + " exists; pass --force to replace it");
      }
    }
  }
  with_option("PREFIX", [&] { transport::write_key_files(prefix, transport::generate_curve_keys()); });
  std::cout << "wrote " << prefix << ".key (keep it private) and " << prefix << ".pub\n";
  return 0;
}

}  // namespace seqflow::cli
