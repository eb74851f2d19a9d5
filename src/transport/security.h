// CURVE security: the options of servers and clients, and the ZAP handler
// that restricts a server to a list of client keys.
#pragma once

#include <zmq.hpp>

#include <array>
#include <atomic>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "seqflow/security.h"

namespace seqflow::transport {

// The keys and key files are public (seqflow/security.h).
using seqflow::check_curve_key;
using seqflow::CurveKeyPair;
using seqflow::generate_curve_keys;
using seqflow::kCurveKeyChars;
using seqflow::read_key_file;
using seqflow::write_key_files;

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
