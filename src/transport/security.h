// CURVE security: key pairs, key files, the options of servers and clients,
// and the ZAP handler that restricts a server to a list of client keys.
#pragma once

#include <zmq.hpp>

#include <array>
#include <atomic>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace seqflow::transport {

inline constexpr size_t kCurveKeyChars = 40;  // Z85 text of a 32-byte key

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters; empty when read from a .pub file
};

CurveKeyPair generate_curve_keys();

// Throws kInvalidArgument naming `what` (e.g. "server_public_key") unless
// `key` is 40 characters of valid Z85.
void check_curve_key(std::string_view key, std::string_view what);

// Writes `prefix.key` (public and secret key, mode 0600) and `prefix.pub`
// (public key only, mode 0644) in ZeroMQ's certificate text format.
void write_key_files(const std::string& prefix, const CurveKeyPair& keys);

// Reads a .key or .pub file written by write_key_files or ZeroMQ's zcert:
// `public-key = "..."` and optional `secret-key = "..."` lines; '#' starts a
// comment. Throws seqflow::Error naming the path and what is wrong (kNotFound
// when it cannot be opened, kInvalidArgument when its content is bad).
CurveKeyPair read_key_file(const std::string& path);

struct ServerSecurity {
  bool enabled = false;
  CurveKeyPair server_keys;
  // Z85 public keys of the clients allowed in; empty: any client that knows
  // the server's public key.
  std::vector<std::string> allowed_client_keys;
};

struct ClientSecurity {
  bool enabled = false;
  CurveKeyPair client_keys;
  std::string server_public_key;
};

// ZeroMQ authenticates through a ZAP handler bound at inproc://zeromq.zap.01
// in the socket's context: one per context. This one accepts CURVE clients
// whose public key is listed and denies everything else. Denied clients
// never complete the handshake, so their requests time out.
class ZapHandler {
 public:
  ZapHandler(zmq::context_t& context, const std::vector<std::string>& allowed_client_keys);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  void stop();  // idempotent; also in the destructor

 private:
  void serve(zmq::socket_t handler, zmq::socket_t stop_receiver);

  std::set<std::array<uint8_t, 32>> allowed_;
  zmq::socket_t stop_sender_;
  std::thread thread_;
};

}  // namespace seqflow::transport
