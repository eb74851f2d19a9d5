// CURVE security: the options of servers and clients, and the ZAP handler
// that restricts a server to a list of client keys.
#pragma once

#include <sys/types.h>
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

// Writes `text` to `path` through open(2), so that a secret file never
// exists with looser permissions, even for a moment; fchmod also tightens a
// file that existed. Throws kInvalidArgument naming `what` and the path.
void write_key_file(const std::string& path, const std::string& text, mode_t mode, std::string_view what);

struct ServerSecurity {
  bool enabled = false;
  CurveKeyPair server_keys;  // its public key is let in with the "service" role
  // Z85 public keys of the clients allowed in (role "client"); with CURVE
  // at least one: a service never admits any key that knows its public key.
  std::vector<std::string> allowed_client_keys;
  // Other services' public keys let in with the "service" role (a storage
  // unit's controller when it has its own key pair).
  std::vector<std::string> service_keys;
};

struct ClientSecurity {
  bool enabled = false;
  CurveKeyPair client_keys;
  std::string server_public_key;
};

// The user ids the ZAP handler gives the peers it admits: ZeroMQ hands them
// to the service as the "User-Id" property of every message they send.
inline constexpr std::string_view kServiceUserId = "service";  // the cluster's own key
inline constexpr std::string_view kClientUserId = "client";    // a listed client key

// ZeroMQ authenticates through a ZAP handler bound at inproc://zeromq.zap.01
// in the socket's context: one per context. This one accepts CURVE clients
// whose public key is listed, as "service" (service_keys) or "client"
// (client_keys; a key in both is a service), and denies everything else with
// status 400: the client's handshake fails (its socket monitor reports
// ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) and it never gets to send a request.
class ZapHandler {
 public:
  ZapHandler(zmq::context_t& context, const std::vector<std::string>& service_keys,
             const std::vector<std::string>& client_keys);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  void stop();  // idempotent; also in the destructor

 private:
  void serve(zmq::socket_t handler, zmq::socket_t stop_receiver);

  std::set<std::array<uint8_t, 32>> services_;
  std::set<std::array<uint8_t, 32>> clients_;
  zmq::socket_t stop_sender_;
  std::thread thread_;
};

}  // namespace seqflow::transport
