#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
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

  ServiceOptions service_options(std::vector<std::string> allowed = {}) const {
    ServiceOptions options;
    options.security.enabled = true;
    options.security.server_keys = server;
    options.security.allowed_client_keys = std::move(allowed);
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
  auto service = echo_service(setup.service_options({generate_curve_keys().public_key, listed.public_key}));
  zmq::context_t context;
  Connection stranger(context, service->endpoint(), setup.client_options(unlisted, setup.server.public_key, 300ms));
  EXPECT_TRUE(throws_code([&] { stranger.call("ping", {}); }, ErrorCode::kTimeout, {"'ping'"}));
  Connection friend_(context, service->endpoint(), setup.client_options(listed, setup.server.public_key, 5s));
  EXPECT_EQ(strings_of(friend_.call("echo", frames_of({"in"}))), std::vector<std::string>{"in"});
  EXPECT_TRUE(throws_code([&] { stranger.call("ping", {}); }, ErrorCode::kTimeout, {"'ping'"}));
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
