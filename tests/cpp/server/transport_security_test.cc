#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>
#include <string>

#include "transport/security.h"
#include "service_test_support.h"

namespace seqflow::transport {
namespace {

using namespace seqflow::server::test;
using server::Service;
using server::ServiceOptions;
namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class KeyFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "seqflow-net-keys-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  fs::path dir_;
};

TEST_F(KeyFiles, RoundTrip) {
  const CurveKeyPair keys = generate_curve_keys();
  EXPECT_EQ(keys.public_key.size(), kCurveKeyChars);
  EXPECT_EQ(keys.secret_key.size(), kCurveKeyChars);
  const std::string prefix = (dir_ / "server").string();
  write_key_files(prefix, keys);

  struct stat info {};
  ASSERT_EQ(::stat((prefix + ".key").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  const CurveKeyPair secret = read_key_file(prefix + ".key");
  EXPECT_EQ(secret.public_key, keys.public_key);
  EXPECT_EQ(secret.secret_key, keys.secret_key);
  const CurveKeyPair pub = read_key_file(prefix + ".pub");
  EXPECT_EQ(pub.public_key, keys.public_key);
  EXPECT_TRUE(pub.secret_key.empty());
  std::ifstream in(prefix + ".pub");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find(keys.secret_key), std::string::npos) << "the .pub file must not hold the secret";
}

TEST_F(KeyFiles, BadFilesNameThePathAndTheProblem) {
  const std::string missing = (dir_ / "missing.key").string();
  EXPECT_TRUE(throws_code([&] { read_key_file(missing); }, ErrorCode::kNotFound, {missing, "cannot be opened"}));
  const CurveKeyPair keys = generate_curve_keys();
  const CurveKeyPair other = generate_curve_keys();
  const std::string empty = write("empty.pub", "# nothing here\n");
  EXPECT_TRUE(throws_invalid([&] { read_key_file(empty); }, {empty, "no public-key"}));
  const std::string short_key = write("short.pub", "public-key = \"abc\"\n");
  EXPECT_TRUE(throws_invalid([&] { read_key_file(short_key); }, {short_key, "40-character", "got 3"}));
  const std::string bad_z85 = write("bad.pub", "public-key = \"" + std::string(40, ',') + "\"\n");
  EXPECT_TRUE(throws_invalid([&] { read_key_file(bad_z85); }, {bad_z85, "Z85"}));
  const std::string unquoted = write("unquoted.pub", "public-key = " + keys.public_key + "\n");
  EXPECT_TRUE(throws_invalid([&] { read_key_file(unquoted); }, {unquoted, "line 1", "quoted"}));
  const std::string mismatch = write("mismatch.key", "curve\n    public-key = \"" + keys.public_key +
                                                         "\"\n    secret-key = \"" + other.secret_key + "\"\n");
  EXPECT_TRUE(throws_invalid([&] { read_key_file(mismatch); }, {mismatch, "does not belong"}));
  // Comments and ZeroMQ certificate sections are fine.
  const std::string commented = write("ok.pub", "# a comment\nmetadata\n    name = \"x\"\ncurve\n  public-key = \"" +
                                                    keys.public_key + "\"  # trailing\n");
  EXPECT_EQ(read_key_file(commented).public_key, keys.public_key);
}

TEST(Security, CheckCurveKeyNamesTheKey) {
  EXPECT_NO_THROW(check_curve_key(generate_curve_keys().public_key, "k"));
  EXPECT_TRUE(throws_invalid([] { check_curve_key("", "server_public_key"); }, {"server_public_key", "got 0"}));
  EXPECT_TRUE(throws_invalid([] { check_curve_key(std::string(40, '"'), "client key"); }, {"client key", "Z85"}));
}

struct CurveSetup {
  CurveKeyPair server = generate_curve_keys();
  CurveKeyPair client = generate_curve_keys();

  // Admits `allowed` (default: the client's key).
  ServiceOptions service_options(std::optional<std::vector<std::string>> allowed = std::nullopt) const {
    ServiceOptions options;
    options.security.enabled = true;
    options.security.server_keys = server;
    options.security.allowed_client_keys = allowed.value_or(std::vector<std::string>{client.public_key});
    return options;
  }
  ConnectionOptions client_options(const CurveKeyPair& keys, const std::string& server_key,
                                   std::chrono::milliseconds timeout) const {
    ConnectionOptions options = timeout_of(timeout);
    options.security.enabled = true;
    options.security.client_keys = keys;
    options.security.server_public_key = server_key;
    return options;
  }
};

TEST(Curve, ClientWithTheServerKeyIsServed) {
  CurveSetup setup;
  auto service = echo_service(setup.service_options());
  zmq::context_t context;
  Connection connection(context, service->endpoint(), setup.client_options(setup.client, setup.server.public_key, 5s));
  EXPECT_EQ(strings_of(connection.call("echo", frames_of({"secret"}))), std::vector<std::string>{"secret"});
}

TEST(Curve, ClientsWithoutCurveOrWithAWrongServerKeyGetNothing) {
  CurveSetup setup;
  auto service = echo_service(setup.service_options());
  zmq::context_t context;
  Connection plain(context, service->endpoint(), timeout_of(300ms));
  EXPECT_TRUE(throws_code([&] { plain.call("ping", {}); }, ErrorCode::kTimeout, {"'ping'"}));
  Connection wrong(context, service->endpoint(),
                   setup.client_options(setup.client, generate_curve_keys().public_key, 300ms));
  EXPECT_TRUE(throws_code([&] { wrong.call("ping", {}); }, ErrorCode::kTimeout, {"'ping'"}));
}

TEST(Curve, AllowlistAcceptsListedClientKeysOnly) {
  CurveSetup setup;
  const CurveKeyPair listed = setup.client;
  const CurveKeyPair unlisted = generate_curve_keys();
  auto service = echo_service(setup.service_options({{generate_curve_keys().public_key, listed.public_key}}));
  zmq::context_t context;
  Connection stranger(context, service->endpoint(), setup.client_options(unlisted, setup.server.public_key, 20s));
  const std::string endpoint = service->endpoint();
  const std::vector<std::string_view> refused = {endpoint, "refused this client's CURVE key",
                                                 "ZAP authentication failed", "'ping'"};
  EXPECT_TRUE(throws_code([&] { stranger.call("ping", {}); }, ErrorCode::kPermissionDenied, refused));
  Connection friend_(context, service->endpoint(), setup.client_options(listed, setup.server.public_key, 5s));
  EXPECT_EQ(strings_of(friend_.call("echo", frames_of({"in"}))), std::vector<std::string>{"in"});
  EXPECT_TRUE(throws_code([&] { stranger.call("ping", {}); }, ErrorCode::kPermissionDenied, refused));
}

TEST(Curve, ARefusedKeyFailsFastWithPermissionDeniedNotATimeout) {
  CurveSetup setup;
  auto service = echo_service(setup.service_options());
  zmq::context_t context;
  // A 20 s deadline, which is only the test's deadline: the refusal comes
  // from the handshake before it (a call that waited for it would end in
  // kTimeout instead).
  Connection stranger(context, service->endpoint(),
                      setup.client_options(generate_curve_keys(), setup.server.public_key, 20s));
  const std::string endpoint = service->endpoint();
  EXPECT_TRUE(throws_code([&] { stranger.call("echo", frames_of({"x"})); }, ErrorCode::kPermissionDenied,
                          {endpoint, "refused this client's CURVE key", "allow-list"}));
  // ZeroMQ does not retry a refused handshake: later calls fail at once too.
  EXPECT_TRUE(throws_code([&] { stranger.send("echo", frames_of({"y"})); }, ErrorCode::kPermissionDenied,
                          {"refused this client's CURVE key"}));
  // A listed key on another connection of the same context is served.
  Connection listed(context, service->endpoint(), setup.client_options(setup.client, setup.server.public_key, 5s));
  EXPECT_EQ(strings_of(listed.call("echo", frames_of({"ok"}))), std::vector<std::string>{"ok"});
}

TEST(Curve, ACurveServiceWithoutAnAllowListRefusesToStart) {
  CurveSetup setup;
  EXPECT_TRUE(throws_invalid([&] { Service service(setup.service_options(std::vector<std::string>{})); },
                             {"allowed_client_keys is empty"}));
}

// A service with "echo" and the services-only "own" (both echo).
std::unique_ptr<Service> service_with_own_op(ServiceOptions options) {
  return echo_service(std::move(options), [](Service& service) {
    service.handle_services_only("own", [](Frames& args) { return std::move(args); });
  });
}

TEST(Curve, ServicesOnlyOpsServeTheClusterKeyAndRefuseClientKeys) {
  CurveSetup setup;
  auto service = service_with_own_op(setup.service_options());
  zmq::context_t context;
  Connection cluster(context, service->endpoint(), setup.client_options(setup.server, setup.server.public_key, 5s));
  EXPECT_EQ(strings_of(cluster.call("own", frames_of({"mine"}))), std::vector<std::string>{"mine"});
  Connection client(context, service->endpoint(), setup.client_options(setup.client, setup.server.public_key, 5s));
  EXPECT_EQ(strings_of(client.call("echo", frames_of({"any"}))), std::vector<std::string>{"any"});
  EXPECT_TRUE(throws_code([&] { client.call("own", frames_of({"theirs"})); }, ErrorCode::kPermissionDenied,
                          {"'own'", "services' own"}));
  // The refusal answers the request: the connection goes on.
  EXPECT_EQ(strings_of(client.call("echo", frames_of({"after"}))), std::vector<std::string>{"after"});
  EXPECT_NE(service->metrics().render().find("reason=\"permission_denied\"} 1"), std::string::npos);
}

TEST(Curve, AnotherServiceKeyListedAsAServiceMayCallServicesOnlyOps) {
  CurveSetup setup;
  const CurveKeyPair other_service = generate_curve_keys();
  ServiceOptions options = setup.service_options();
  options.security.service_keys = {other_service.public_key};
  auto service = service_with_own_op(options);
  zmq::context_t context;
  Connection other(context, service->endpoint(), setup.client_options(other_service, setup.server.public_key, 5s));
  EXPECT_EQ(strings_of(other.call("own", frames_of({"x"}))), std::vector<std::string>{"x"});
}

TEST(Curve, WithoutCurveServicesOnlyOpsServeEveryone) {
  auto service = service_with_own_op(ServiceOptions{});
  zmq::context_t context;
  Connection plain(context, service->endpoint(), timeout_of(5s));
  EXPECT_EQ(strings_of(plain.call("own", frames_of({"x"}))), std::vector<std::string>{"x"});
}

// One ZAP request for `key` (binary, 32 bytes) to the handler of `context`:
// [status code, user id].
std::pair<std::string, std::string> zap_answer(zmq::context_t& context, const std::string& key) {
  zmq::socket_t request(context, zmq::socket_type::req);
  request.set(zmq::sockopt::linger, 0);
  request.set(zmq::sockopt::rcvtimeo, 5000);
  request.connect("inproc://zeromq.zap.01");
  for (const std::string_view part : {"1.0", "7", "seqflow", "127.0.0.1", "", "CURVE"}) {
    request.send(copy_frame(part), zmq::send_flags::sndmore);
  }
  request.send(copy_frame(std::string_view(key)), zmq::send_flags::none);
  Frames reply;
  do {
    zmq::message_t part;
    if (!request.recv(part)) return {"no reply", ""};
    reply.push_back(std::move(part));
  } while (reply.back().more());
  if (reply.size() != 6) return {"malformed", ""};
  EXPECT_EQ(as_string_view(reply[1]), "7");
  return {std::string(as_string_view(reply[2])), std::string(as_string_view(reply[4]))};
}

std::string binary_key(const std::string& z85) {
  std::string binary(32, '\0');
  zmq_z85_decode(reinterpret_cast<uint8_t*>(binary.data()), z85.c_str());
  return binary;
}

TEST(Curve, TheZapHandlerNamesEachAdmittedKeysRole) {
  const CurveKeyPair service = generate_curve_keys();
  const CurveKeyPair client = generate_curve_keys();
  zmq::context_t context;
  ZapHandler handler(context, {service.public_key}, {client.public_key, service.public_key});
  EXPECT_EQ(zap_answer(context, binary_key(service.public_key)),
            std::make_pair(std::string("200"), std::string("service")));
  EXPECT_EQ(zap_answer(context, binary_key(client.public_key)),
            std::make_pair(std::string("200"), std::string("client")));
  EXPECT_EQ(zap_answer(context, binary_key(generate_curve_keys().public_key)),
            std::make_pair(std::string("400"), std::string()));
  handler.stop();
}

TEST(Curve, BadClientKeysAreRejectedUpFront) {
  zmq::context_t context;
  ConnectionOptions options;
  options.security.enabled = true;
  options.security.client_keys = generate_curve_keys();
  options.security.server_public_key = "too short";
  EXPECT_TRUE(throws_invalid([&] { Connection(context, "tcp://127.0.0.1:1", options); }, {"server_public_key"}));
}

}  // namespace
}  // namespace seqflow::transport
