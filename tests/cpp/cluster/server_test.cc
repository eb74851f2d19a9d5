// seqflow/server.h: the services in this process, through public headers
// only (plus the shared test helpers).
#include "seqflow/server.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "remote_service_test_support.h"
#include "server/service_settings.h"
#include "transport/connection.h"
#include "storage_test_support.h"
#include "seqflow/client.h"
#include "seqflow/security.h"
#include "test_support.h"

namespace seqflow::test {
namespace {

std::shared_ptr<Client> client_of(const std::string& controller_endpoint, const RemoteOptions& base = {}) {
  RemoteOptions options = base;
  options.controller_endpoint = controller_endpoint;
  options.timeout = std::chrono::seconds(20);
  return make_remote_client(options);
}

StorageServerOptions unit_options(const std::string& controller_endpoint) {
  StorageServerOptions options;
  options.controller_endpoint = controller_endpoint;
  options.heartbeat = std::chrono::milliseconds(100);
  return options;
}

// Puts ids first.. with custom_meta {"id": ...} and reads them back.
void expect_round_trip(Client& client, const std::string& partition, int64_t first) {
  const std::vector<int64_t> values = {first, first + 1, first + 2};
  client.put_new(partition, {int64_column("x", values)}, ids(first, values.size()));
  const BatchMeta meta = client.get_meta(fetch(3, partition, "train"));
  EXPECT_EQ(values_of(client, meta), values);
  EXPECT_EQ(ids_of(meta), values);
}

TEST(Server, StartsOnAFreePortAndServesARemoteClient) {
  ControllerServer controller({});
  EXPECT_TRUE(controller.endpoint().starts_with("tcp://127.0.0.1:"));
  EXPECT_NE(controller.endpoint(), "tcp://127.0.0.1:0");
  StorageServer unit(unit_options(controller.endpoint()));
  EXPECT_NE(unit.endpoint(), controller.endpoint());
  EXPECT_EQ(controller.metrics_url(), "");
  expect_round_trip(*client_of(controller.endpoint()), "p", 10);
}

TEST(Server, StopsAndStartsAgainOnTheSameEndpoint) {
  auto controller = std::make_unique<ControllerServer>(ControllerServerOptions{});
  const std::string endpoint = controller->endpoint();
  auto unit = std::make_unique<StorageServer>(unit_options(endpoint));
  expect_round_trip(*client_of(endpoint), "p", 1);
  unit->stop();
  unit->stop();  // idempotent
  controller->stop();
  EXPECT_EQ(controller->endpoint(), endpoint);
  controller.reset();
  unit.reset();

  ControllerServerOptions again;
  again.bind = endpoint;
  ControllerServer restarted(again);
  EXPECT_EQ(restarted.endpoint(), endpoint);
  StorageServer new_unit(unit_options(endpoint));
  expect_round_trip(*client_of(endpoint), "q", 7);  // a fresh controller: nothing of "p" left
}

TEST(Server, ServesWithCurveKeysAndMetrics) {
  const CurveKeyPair cluster = generate_curve_keys();
  const CurveKeyPair client_keys = generate_curve_keys();
  ControllerServerOptions controller_options;
  controller_options.curve = {true, cluster, {client_keys.public_key}};
  controller_options.metrics_address = "127.0.0.1:0";
  ControllerServer controller(controller_options);
  EXPECT_TRUE(controller.metrics_url().starts_with("http://127.0.0.1:"));
  EXPECT_TRUE(controller.metrics_url().ends_with("/metrics"));
  StorageServerOptions storage_options = unit_options(controller.endpoint());
  storage_options.curve = {true, cluster, {client_keys.public_key}};
  StorageServer unit(storage_options);

  RemoteOptions remote;
  remote.server_public_key = cluster.public_key;
  remote.client_public_key = client_keys.public_key;
  remote.client_secret_key = client_keys.secret_key;
  expect_round_trip(*client_of(controller.endpoint(), remote), "p", 3);
}

// docs/deployment.md's secure deployment through server.h: one key directory for every
// service; a listed client is served, an unlisted one refused at once, and a
// listed client may not call the services' own register_storage.
TEST(Server, ACurveClusterFromOneKeyDirectoryAdmitsOnlyItsKeys) {
  TempDir dir;
  const std::string keys = dir.file("keys");
  server::write_cluster_directory(keys, {"trainer"}, false);
  ControllerServerOptions controller_options;
  controller_options.curve = read_cluster_curve(keys);
  ControllerServer controller(controller_options);
  StorageServerOptions storage_options = unit_options(controller.endpoint());
  storage_options.curve = read_cluster_curve(keys);
  StorageServer unit(storage_options);

  const std::string cluster_public = read_key_file(keys + "/cluster.pub").public_key;
  const CurveKeyPair trainer = read_key_file(keys + "/clients/trainer.key");
  RemoteOptions remote;
  remote.server_public_key = cluster_public;
  remote.client_public_key = trainer.public_key;
  remote.client_secret_key = trainer.secret_key;
  expect_round_trip(*client_of(controller.endpoint(), remote), "p", 3);

  const CurveKeyPair stranger = generate_curve_keys();
  remote.client_public_key = stranger.public_key;
  remote.client_secret_key = stranger.secret_key;
  EXPECT_TRUE(throws_code([&] { client_of(controller.endpoint(), remote); }, ErrorCode::kPermissionDenied,
                          {controller.endpoint(), "ZAP authentication failed"}));
  zmq::context_t context;
  transport::ConnectionOptions connection_options;
  connection_options.timeout = std::chrono::seconds(20);
  connection_options.security = {true, stranger, cluster_public};
  transport::Connection to_unit(context, unit.endpoint(), connection_options);
  EXPECT_TRUE(throws_code([&] { to_unit.call("ping", {}); }, ErrorCode::kPermissionDenied,
                          {unit.endpoint(), "refused this client's CURVE key"}));

  connection_options.security.client_keys = trainer;
  transport::Connection to_controller(context, controller.endpoint(), connection_options);
  EXPECT_TRUE(throws_code([&] { to_controller.call("register_storage", {}); }, ErrorCode::kPermissionDenied,
                          {"'register_storage'", "services' own"}));
}

TEST(Server, StorageServerReportsWhatItHolds) {
  ControllerServer controller({});
  StorageServer unit(unit_options(controller.endpoint()));
  EXPECT_EQ(unit.stats().samples, 0u);
  expect_round_trip(*client_of(controller.endpoint()), "p", 1);
  EXPECT_EQ(unit.stats().samples, 3u);
  EXPECT_GT(unit.stats().bytes, 0u);
}

TEST(Server, ReadsTheServerCurveFromKeyFiles) {
  TempDir dir;
  const CurveKeyPair cluster = generate_curve_keys();
  const CurveKeyPair alice = generate_curve_keys();
  const CurveKeyPair bob = generate_curve_keys();
  write_key_files(dir.file("cluster"), cluster);
  std::filesystem::create_directory(dir.file("clients"));
  write_key_files(dir.file("clients/bob"), bob);
  write_key_files(dir.file("clients/alice"), alice);
  std::filesystem::remove(dir.file("clients/alice.key"));
  std::filesystem::remove(dir.file("clients/bob.key"));

  EXPECT_FALSE(read_server_curve("", {}).enabled);
  const ServerCurve curve = read_server_curve(dir.file("cluster.key"), {dir.file("clients")});
  EXPECT_TRUE(curve.enabled);
  EXPECT_EQ(curve.keys.public_key, cluster.public_key);
  EXPECT_EQ(curve.keys.secret_key, cluster.secret_key);
  // A directory's .pub files by name: alice before bob.
  EXPECT_EQ(curve.allowed_client_keys, (std::vector<std::string>{alice.public_key, bob.public_key}));
  EXPECT_EQ(read_server_curve(dir.file("cluster.key"), {dir.file("cluster.pub")}).allowed_client_keys,
            std::vector<std::string>{cluster.public_key});

  const ErrorCode invalid = ErrorCode::kInvalidArgument;
  EXPECT_TRUE(throws_code([&] { read_server_curve(dir.file("cluster.pub"), {}); }, invalid,
                          {"cluster.pub", "holds no secret key"}));
  EXPECT_TRUE(throws_code([&] { read_server_curve("", {dir.file("cluster.pub")}); }, invalid,
                          {"cluster.pub", "need the service's own CURVE secret key file"}));
  EXPECT_TRUE(
      throws_code([&] { read_server_curve(dir.file("missing.key"), {}); }, ErrorCode::kNotFound, {"missing.key"}));
}

TEST(Server, AClusterKeyDirectoryIsWrittenAndReadBack) {
  TempDir dir;
  const std::string keys = dir.file("keys");
  const std::vector<std::string> written = server::write_cluster_directory(keys, {"trainer", "rollout"}, false);
  EXPECT_EQ(written.size(), 7u);
  struct stat info {};
  ASSERT_EQ(::stat((keys + "/clients").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  for (const char* secret : {"/cluster.key", "/metrics.token", "/clients/trainer.key"}) {
    ASSERT_EQ(::stat((keys + secret).c_str(), &info), 0) << secret;
    EXPECT_EQ(info.st_mode & 0777, 0600u) << secret;
  }
  const std::string token = read_metrics_token(keys);
  EXPECT_EQ(token.size(), 64u);
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos);

  const ServerCurve curve = read_cluster_curve(keys);
  EXPECT_TRUE(curve.enabled);
  const CurveKeyPair cluster = read_key_file(keys + "/cluster.key");
  EXPECT_EQ(curve.keys.secret_key, cluster.secret_key);
  // cluster.pub, then the clients by name.
  EXPECT_EQ(curve.allowed_client_keys,
            (std::vector<std::string>{cluster.public_key, read_key_file(keys + "/clients/rollout.pub").public_key,
                                      read_key_file(keys + "/clients/trainer.pub").public_key}));

  const ErrorCode invalid = ErrorCode::kInvalidArgument;
  EXPECT_TRUE(
      throws_code([&] { server::write_cluster_directory(keys, {}, false); }, invalid, {"cluster.key", "--force"}));
  EXPECT_TRUE(throws_code([&] { server::write_cluster_directory(keys, {"trainer"}, false); }, invalid,
                          {"trainer", "exists", "--force"}));
  EXPECT_TRUE(throws_code([&] { server::write_cluster_directory(keys, {"../evil"}, false); }, invalid, {"../evil"}));
  // A new client joins the cluster pair, which stays.
  server::write_cluster_directory(keys, {"eval"}, false);
  EXPECT_EQ(read_cluster_curve(keys).keys.public_key, cluster.public_key);
  EXPECT_EQ(read_cluster_curve(keys).allowed_client_keys.size(), 4u);
  EXPECT_EQ(read_metrics_token(keys), token);
  server::write_cluster_directory(keys, {}, true);
  EXPECT_NE(read_cluster_curve(keys).keys.public_key, cluster.public_key);

  EXPECT_TRUE(throws_code([&] { read_cluster_curve(dir.file("missing")); }, ErrorCode::kNotFound,
                          {dir.file("missing"), "keygen --cluster"}));
  EXPECT_TRUE(throws_code([&] { read_metrics_token(dir.file("missing")); }, ErrorCode::kNotFound, {"metrics.token"}));
}

// Starts a controller server with the default options changed by `change`.
void start_controller(const std::function<void(ControllerServerOptions&)>& change) {
  ControllerServerOptions options;
  change(options);
  ControllerServer server(options);
}

TEST(Server, BadOptionsAreNamed) {
  const ErrorCode invalid = ErrorCode::kInvalidArgument;
  EXPECT_TRUE(
      throws_code([] { start_controller([](auto& o) { o.storage_units = 0; }); }, invalid, {"storage_units", "got 0"}));
  EXPECT_TRUE(throws_code([] { start_controller([](auto& o) { o.bind = "nowhere"; }); }, invalid, {"nowhere"}));
  EXPECT_TRUE(throws_code([] { start_controller([](auto& o) {
                                 o.curve = {true, {"short", "keys"}, {}};
                               }); }, invalid,
                          {"curve.keys.public_key"}));
  EXPECT_TRUE(throws_code(
      [] { start_controller([](auto& o) { o.curve.allowed_client_keys = {generate_curve_keys().public_key}; }); },
      invalid, {"curve.allowed_client_keys", "curve.enabled"}));
  // CURVE without an allow-list would admit any key pair.
  for (const bool storage : {false, true}) {
    EXPECT_TRUE(throws_code(
        [&] {
          ServerCurve curve{true, generate_curve_keys(), {}};
          if (storage) {
            StorageServerOptions options = unit_options("tcp://127.0.0.1:5555");
            options.curve = curve;
            StorageServer server(options);
          } else {
            start_controller([&](auto& o) { o.curve = curve; });
          }
        },
        invalid, {"allow-list", "--curve-clients", "curve_clients", "--curve-keys DIR"}));
  }
  EXPECT_TRUE(throws_code([] { start_controller([](auto& o) { o.metrics_address = "no-port"; }); }, invalid,
                          {"metrics_address", "no-port"}));
  EXPECT_TRUE(throws_code([] { StorageServer(StorageServerOptions{}); }, invalid, {"controller endpoint is empty"}));
  EXPECT_TRUE(throws_code([] { StorageServer(unit_options("tcp://127.0.0.1:99999")); }, invalid,
                          {"controller_endpoint", "tcp://127.0.0.1:99999"}));
  EXPECT_TRUE(throws_code(
      [] {
        StorageServerOptions options = unit_options("tcp://127.0.0.1:5555");
        options.heartbeat = std::chrono::milliseconds(0);
        StorageServer server(options);
      },
      invalid, {"heartbeat", "0 ms"}));
}

}  // namespace
}  // namespace seqflow::test
