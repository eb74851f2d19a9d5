// seqflow serve: the controller or a storage unit as a ZeroMQ service (remote
// mode), until SIGTERM or SIGINT.
#include <csignal>
#include <iostream>
#include <limits>
#include <malloc.h>
#include <pthread.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/json_text.h"
#include "server/checkpoint_root.h"
#include "server/service_settings.h"
#include "seqflow/error.h"
#include "seqflow/limits.h"

namespace seqflow::cli {

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

constexpr Option kMetricsOption{
    "--metrics", "HOST:PORT",
    "serve Prometheus metrics at http://HOST:PORT/metrics (and /health); port 0 picks a free port"};
constexpr Option kWorkersOption{
    "--workers", "MAX",
    "at most MAX requests handled at once by worker threads (default: controller 256, storage 64; blocking fetches "
    "wait without one)"};
constexpr Option kMaxRequestOption{"--max-request-bytes", "N", "a larger request gets an error reply (default 8 GiB)"};
constexpr Option kCurveSecretOption{
    "--curve-secret", "FILE.key",
    "serve with CURVE encryption and authentication, with the key pair in FILE.key (seqflow keygen); "
    "the controller and the storage units share one cluster key pair"};
constexpr Option kCurveClientsOption{
    "--curve-clients", "FILE,...",
    "admit only clients whose public key is in these .pub files (or in the .pub files of these "
    "directories), plus the cluster key itself; required with --curve-secret"};
constexpr Option kCurveKeysOption{
    "--curve-keys", "DIR",
    "CURVE with a cluster key directory (seqflow keygen --cluster DIR): serve with DIR/cluster.key, admit "
    "DIR/cluster.pub and every DIR/clients/*.pub, and require DIR/metrics.token on GET /metrics; "
    "instead of --curve-secret and --curve-clients"};

constexpr Option kCheckpointRootOption{
    "--checkpoint-root", "DIR",
    "save and load clients' checkpoints only under DIR (a path outside it gets an error reply); "
    "default: $SEQFLOW_CHECKPOINT_ROOT, else ~/.local/state/seqflow/checkpoints (made 0700)"};

constexpr Option kControllerOptions[] = {
    {"--bind", "ADDR", "the ZeroMQ endpoint to listen on (default tcp://127.0.0.1:5555; port 0: a free port)"},
    {"--storage-units", "N", "storage units to wait for before serving data calls (default 1)"},
    {"--sampler", "NAME", "sequential (default), grpo_group_n, rank_aware, seqlen_balanced or token_budget"},
    {"--sampler-args", "JSON", "the sampler's arguments, e.g. '{\"n_samples_per_prompt\": 8, \"dp_size\": 4}'"},
    {"--polling-mode", "",
     "fetches that do not say otherwise return an empty batch at once when too little "
     "is ready, instead of waiting"},
    {"--timing-alignment", "N",
     "fit each task's workload model (report_timing) with a term for sequence lengths that are not a "
     "multiple of N, as seqflow calibrate --alignment N (default 1: none)"},
    {"--load-checkpoint", "DIR", "start from a checkpoint directory written by save_checkpoint"},
    {"--insert-lease", "SECONDS",
     "samples a put inserted and did not mark produced within SECONDS (its producer died mid-put) are "
     "reclaimed (default: each put's own timeout plus 2 s)"},
    kMetricsOption,
    kWorkersOption,
    kMaxRequestOption,
    kCurveKeysOption,
    kCurveSecretOption,
    kCurveClientsOption,
    kCheckpointRootOption,
};

constexpr Option kStorageOptions[] = {
    {"--bind", "ADDR", "the ZeroMQ endpoint to listen on (default tcp://127.0.0.1:0: a free port)"},
    {"--controller", "ADDR", "the controller service to register with (e.g. tcp://10.0.0.1:5555); required"},
    {"--advertise", "ADDR",
     "the endpoint clients reach this unit at (default: the bound one); needed when --bind uses a "
     "wildcard address such as tcp://0.0.0.0:7000"},
    {"--max-bytes", "N", "capacity in bytes (default 0: unlimited)"},
    {"--max-samples", "N", "capacity in samples (default 0: unlimited)"},
    {"--max-bytes-per-partition", "N", "capacity in bytes for each partition (default 0: unlimited)"},
    {"--max-samples-per-partition", "N", "capacity in samples for each partition (default 0: unlimited)"},
    {"--when-full", "wait|raise",
     "a put that does not fit fails 'storage full' at once (raise, the default) or waits until clears make room "
     "(wait): its client retries within the put's timeout"},
    {"--high-watermark", "F", "puts stop fitting above this fraction of each limit (default 1)"},
    {"--low-watermark", "F",
     "a limit that filled admits puts again once usage fell to this fraction (default: the high watermark)"},
    kMetricsOption,
    kWorkersOption,
    kMaxRequestOption,
    kCurveKeysOption,
    kCurveSecretOption,
    kCurveClientsOption,
    kCheckpointRootOption,
    {"--controller-key", "FILE.pub", "the controller's public key, when it is not the cluster key of --curve-secret"},
};

constexpr std::string_view kCurveNotes =
    "CURVE: 'seqflow keygen --cluster keys --clients trainer' writes keys/cluster.key,\n"
    "keys/cluster.pub, keys/clients/trainer.key and .pub and keys/metrics.token. Start\n"
    "the controller and every storage unit with --curve-keys keys; clients need\n"
    "keys/cluster.pub as the server key and their own key (keys/clients/trainer.key).\n"
    "Only the cluster key may call the services' own operations (register_storage).\n"
    "The service prints 'seqflow ROLE serving on ENDPOINT' once it serves, and exits 0\n"
    "on SIGTERM or SIGINT. Exit status 2 on bad options.";

constexpr CommandSpec kControllerSpec{
    "serve controller",
    "serve controller [--bind ADDR] [--storage-units N] [options]",
    "Run the control plane (partitions, production and consumption, samplers) as a\n"
    "service. Clients reach it at ADDR; it names the storage units to them (sample\n"
    "gi lives on unit (gi / 64) % N, units ordered by endpoint).",
    kControllerOptions,
    kCurveNotes,
    "seqflow serve controller --bind tcp://10.0.0.1:5555 --storage-units 4 --sampler seqlen_balanced "
    "--sampler-args '{\"n_samples_per_prompt\": 8, \"dp_size\": 4}'",
};

constexpr CommandSpec kStorageSpec{
    "serve storage",
    "serve storage --controller ADDR [--bind ADDR] [options]",
    "Run one storage unit (the data plane's bytes) as a service that registers with\n"
    "the controller service.",
    kStorageOptions,
    kCurveNotes,
    "seqflow serve storage --controller tcp://10.0.0.1:5555 --bind tcp://10.0.0.2:0",
};

constexpr Option kRoleOptions[] = {
    {"controller", "", "the control plane; 'seqflow serve controller --help' lists its options"},
    {"storage", "", "one storage unit; 'seqflow serve storage --help' lists its options"},
};

constexpr CommandSpec kServeSpec{
    "serve",
    "serve controller|storage [options]",
    "Run seqflow's services for remote mode: one controller and N storage units,\n"
    "on one machine or several. Clients connect with seqflow.init({\"controller\":\n"
    "{\"address\": ADDR}}).",
    kRoleOptions,
    kCurveNotes,
    "seqflow serve controller --bind tcp://127.0.0.1:5555",
};

std::vector<std::string> split_list(const std::string& text, std::string_view option) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (items.back().empty()) {
      throw_invalid(std::string(option) + " has an empty entry in '" + text + "'");
    }
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

server::ServingSettings serving_settings(const Arguments& args) {
  server::ServingSettings serving;
  serving.bind = args.get("--bind").value_or("");
  serving.max_workers = static_cast<size_t>(args.integer("--workers", 0, 1, 1 << 16));
  serving.max_request_bytes = static_cast<size_t>(args.integer("--max-request-bytes", 0, 1, kInt64Max));
  serving.curve_secret_file = args.get("--curve-secret").value_or("");
  serving.curve_keys_dir = args.get("--curve-keys").value_or("");
  if (auto clients = args.get("--curve-clients")) serving.curve_client_files = split_list(*clients, "--curve-clients");
  serving.checkpoint_root = args.get("--checkpoint-root").value_or("");
  return serving;
}

std::shared_ptr<Sampler> sampler_of(const Arguments& args) {
  const std::optional<std::string> name = args.get("--sampler");
  const std::optional<std::string> text = args.get("--sampler-args");
  if (!name) {
    if (text) throw_invalid("--sampler-args '" + *text + "' needs --sampler NAME");
    return nullptr;
  }
  Value sampler_args = Value::object();
  if (text) {
    try {
      sampler_args = parse_json_text(*text, kMaxDecodeNesting);
    } catch (const Error&) {
      sampler_args = Value();  // refused below, as any value that is no object
    }
    if (!sampler_args.is_object()) throw_invalid("--sampler-args must be a JSON object, got '" + *text + "'");
  }
  return with_option("--sampler", [&] { return make_sampler(*name, sampler_args); });
}

// The files and endpoints the options name, checked before the service is
// made so that an error names its option (the service settings check them
// again, naming them as Python's serve_controller and serve_storage do).
void check_files_and_endpoints(const Arguments& args) {
  if (const auto bind = args.get("--bind")) with_option("--bind", [&] { server::check_bind_address(*bind); });
  const std::optional<std::string> secret = args.get("--curve-secret");
  const std::optional<std::string> keys = args.get("--curve-keys");
  if (keys) {
    for (const std::string_view option : {"--curve-secret", "--curve-clients"}) {
      if (args.get(option)) {
        throw_invalid("--curve-keys '" + *keys + "' replaces " + std::string(option) + ": give one or the other");
      }
    }
    with_option("--curve-keys", [&] { read_cluster_curve(*keys); });
    if (args.get("--metrics")) with_option("--curve-keys", [&] { read_metrics_token(*keys); });
  }
  for (const std::string_view option : {"--curve-clients", "--controller-key"}) {
    const std::optional<std::string> value = args.get(option);
    if (value && !secret && !(keys && option == "--controller-key")) {
      throw_invalid(std::string(option) + " '" + *value + "' needs --curve-secret FILE.key, the service's own keys");
    }
  }
  if (secret) with_option("--curve-secret", [&] { server::read_secret_key_file(*secret); });
  if (auto clients = args.get("--curve-clients")) {
    with_option("--curve-clients", [&] { server::read_client_key_files(split_list(*clients, "--curve-clients")); });
  }
  if (auto key = args.get("--controller-key")) with_option("--controller-key", [&] { transport::read_key_file(*key); });
  if (auto root = args.get("--checkpoint-root")) {
    with_option("--checkpoint-root", [&] { server::CheckpointRoot{*root}; });
  }
  for (const std::string_view option : {"--controller", "--advertise"}) {
    if (auto endpoint = args.get(option)) server::check_endpoint(*endpoint, option);
  }
  if (secret && !args.get("--curve-clients")) {
    throw_invalid("--curve-secret '" + *secret +
                  "' needs --curve-clients FILE,...: a CURVE service admits only listed client keys; list them, "
                  "or use --curve-keys DIR (seqflow keygen --cluster DIR)");
  }
}

// Blocked before any thread starts, so every thread inherits the mask and
// only sigwait() sees the signals: shutdown runs in main, not in a handler.
sigset_t block_stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// A service answers requests with buffers of megabytes (a kv_list of 100k
// keys is ~11 MB). glibc maps such buffers afresh and unmaps them once freed,
// so every request paid thousands of page faults, more than building its
// reply; kept in the heap, the next request reuses the pages.
void keep_freed_buffers() {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 32 << 20);   // glibc's largest
  mallopt(M_TRIM_THRESHOLD, 256 << 20);  // returned to the system beyond this
#endif
}

// `make_service` makes the service (its threads inherit the signal mask).
// The serving line comes only once the service and its metrics endpoint
// serve: every error before it names its option and exits 2 (see main.cc).
template <class MakeService>
int serve_until_signal(std::string_view role, MakeService make_service,
                       const std::optional<std::string>& metrics_address, const std::string& metrics_token) {
  const sigset_t signals = block_stop_signals();
  keep_freed_buffers();
  const auto service = make_service();
  with_option("--bind", [&] { service->start(); });
  std::unique_ptr<server::MetricsHttpServer> metrics;
  if (metrics_address) {
    metrics = with_option("--metrics", [&] {
      return server::serve_metrics(*metrics_address, "--metrics", service->metrics(), metrics_token);
    });
  }
  std::cout << server::serving_line(role, service->endpoint(), metrics.get()) << std::endl;
  int received = 0;
  sigwait(&signals, &received);
  std::cerr << "seqflow " << role << ": " << (received == SIGTERM ? "SIGTERM" : "SIGINT") << ", stopping\n";
  if (metrics) metrics->stop();
  service->stop();
  return 0;
}

void refuse_positionals(const Arguments& args, const CommandSpec& spec) {
  if (!args.positionals().empty()) {
    throw_invalid("unexpected argument '" + args.positionals().front() + "'; see 'seqflow " + std::string(spec.name) +
                  " --help'");
  }
}

int serve_controller(std::span<const std::string> arguments) {
  const std::optional<Arguments> args = parse_arguments(arguments, kControllerSpec);
  if (!args) return 0;
  refuse_positionals(*args, kControllerSpec);
  server::ControllerSettings settings;
  settings.serving = serving_settings(*args);
  settings.storage_units = static_cast<size_t>(args->integer("--storage-units", 1, 1, 1 << 20));
  settings.sampler = sampler_of(*args);
  settings.polling_mode = args->has("--polling-mode");
  settings.timing_alignment = args->integer("--timing-alignment", 1, 1, kInt64Max);
  settings.load_checkpoint = args->get("--load-checkpoint").value_or("");
  settings.insert_lease = std::chrono::seconds(args->integer("--insert-lease", 0, 1, 7 * 24 * 3600));
  check_files_and_endpoints(*args);
  server::ControllerServiceOptions options = server::controller_service_options(settings);
  // The controller loads --load-checkpoint as it is made; its other options are checked already.
  const auto make_service = [&] {
    return with_option("--load-checkpoint",
                       [&] { return std::make_unique<server::ControllerService>(std::move(options)); });
  };
  return serve_until_signal("controller", make_service, args->get("--metrics"),
                            args->get("--metrics") ? server::metrics_token_of(settings.serving) : "");
}

WhenFull when_full_of(const std::optional<std::string>& text) {
  if (!text || *text == "raise") return WhenFull::kRaise;
  if (*text == "wait") return WhenFull::kWait;
  throw_invalid("--when-full must be wait or raise, got '" + *text + "'");
}

StorageOptions storage_options(const Arguments& args) {
  StorageOptions options;
  const auto count = [&](std::string_view option) {
    return static_cast<uint64_t>(args.integer(option, 0, 0, kInt64Max));
  };
  options.max_bytes = count("--max-bytes");
  options.max_samples = count("--max-samples");
  options.max_bytes_per_partition = count("--max-bytes-per-partition");
  options.max_samples_per_partition = count("--max-samples-per-partition");
  options.when_full = when_full_of(args.get("--when-full"));
  options.high_watermark = args.number("--high-watermark").value_or(1.0);
  options.low_watermark = args.number("--low-watermark");
  try {
    check_storage_options(options);
  } catch (const Error& error) {  // it names low_watermark or high_watermark
    const bool low = std::string_view(error.what()).starts_with("low_");
    throw Error(error.code(), naming_option(low ? "--low-watermark" : "--high-watermark", error.what()));
  }
  return options;
}

int serve_storage(std::span<const std::string> arguments) {
  const std::optional<Arguments> args = parse_arguments(arguments, kStorageSpec);
  if (!args) return 0;
  refuse_positionals(*args, kStorageSpec);
  if (!args->has("--controller")) throw_invalid("--controller ADDR is required: the controller service's endpoint");
  server::StorageSettings settings;
  settings.serving = serving_settings(*args);
  settings.controller = *args->get("--controller");
  settings.advertise = args->get("--advertise").value_or("");
  settings.storage = storage_options(*args);
  settings.controller_key_file = args->get("--controller-key").value_or("");
  check_files_and_endpoints(*args);
  server::StorageServiceOptions options = server::storage_service_options(settings);
  const auto make_service = [&] { return std::make_unique<server::StorageService>(std::move(options)); };
  return serve_until_signal("storage", make_service, args->get("--metrics"),
                            args->get("--metrics") ? server::metrics_token_of(settings.serving) : "");
}

}  // namespace

int run_serve(std::span<const std::string> args) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    (args.empty() ? std::cerr : std::cout) << help_text(kServeSpec);
    return args.empty() ? 2 : 0;
  }
  if (args[0] != "controller" && args[0] != "storage") {
    throw_invalid("ROLE must be controller or storage, got '" + args[0] + "'");
  }
  return args[0] == "controller" ? serve_controller(args.subspan(1)) : serve_storage(args.subspan(1));
}

}  // namespace seqflow::cli
