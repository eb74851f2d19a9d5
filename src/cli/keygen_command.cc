// seqflow keygen: a CURVE key pair for remote mode, as PREFIX.key and PREFIX.pub.
#include <filesystem>
#include <iostream>

#include "cli/args.h"
#include "cli/commands.h"
#include "transport/security.h"
#include "seqflow/error.h"

namespace seqflow::cli {

namespace {

constexpr Option kOptions[] = {
    {"PREFIX", "", "path prefix of the files to write: PREFIX.key and PREFIX.pub"},
    {"--force", "", "replace existing files (the old key pair is lost)"},
};

constexpr CommandSpec kSpec{
    "keygen",
    "keygen PREFIX [--force]",
    "Generate a CURVE key pair: PREFIX.key holds the public and the secret key\n"
    "(mode 0600; keep it private), PREFIX.pub only the public key (hand it to\n"
    "peers). Both are in ZeroMQ's certificate format.",
    kOptions,
    "One cluster pair serves the controller and the storage units (--curve-secret\n"
    "cluster.key); every client has its own pair and cluster.pub.",
    "seqflow keygen cluster",
};

}  // namespace

int run_keygen(std::span<const std::string> arguments) {
  const std::optional<Arguments> args = parse_arguments(arguments, kSpec);
  if (!args) return 0;
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
