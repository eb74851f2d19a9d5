#include "transport/security.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "transport/frames.h"
#include "seqflow/error.h"

namespace seqflow {
namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";

std::array<uint8_t, 32> decode_key(const std::string& key) {
  std::array<uint8_t, 32> binary{};
  zmq_z85_decode(binary.data(), key.c_str());
  return binary;
}

std::string certificate_text(const CurveKeyPair& keys, bool with_secret) {
  std::ostringstream out;
  out << "#   ZeroMQ CURVE " << (with_secret ? "**Secret** Certificate" : "Public Certificate") << "\n"
      << (with_secret ? "#   Keep this file private: it holds the secret key.\n"
                      : "#   Give this file to peers that must trust this key.\n")
      << "\nmetadata\ncurve\n    public-key = \"" << keys.public_key << "\"\n";
  if (with_secret) out << "    secret-key = \"" << keys.secret_key << "\"\n";
  return out.str();
}

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

}  // namespace

CurveKeyPair generate_curve_keys() {
  char public_key[kCurveKeyChars + 1];
  char secret_key[kCurveKeyChars + 1];
  if (zmq_curve_keypair(public_key, secret_key) != 0) {
    throw Error(ErrorCode::kInternal,
                std::string("generate_curve_keys: ZeroMQ has no CURVE support: ") + zmq_strerror(zmq_errno()));
  }
  return {public_key, secret_key};
}

void check_curve_key(std::string_view key, std::string_view what) {
  if (key.size() != kCurveKeyChars) {
    throw_invalid(std::string(what) + " must be a " + std::to_string(kCurveKeyChars) +
                  "-character Z85 CURVE key, got " + std::to_string(key.size()) + " characters");
  }
  const std::string text(key);
  uint8_t binary[32];
  if (zmq_z85_decode(binary, text.c_str()) == nullptr) {
    throw_invalid(std::string(what) + " is not valid Z85 text");
  }
}

void write_key_files(const std::string& prefix, const CurveKeyPair& keys) {
  check_curve_key(keys.public_key, "write_key_files: public_key");
  check_curve_key(keys.secret_key, "write_key_files: secret_key");
  transport::write_key_file(prefix + ".key", certificate_text(keys, true), 0600, "key file");
  transport::write_key_file(prefix + ".pub", certificate_text(keys, false), 0644, "key file");
}

CurveKeyPair read_key_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw Error(ErrorCode::kNotFound, "key file '" + path + "' cannot be opened: " + std::strerror(errno));
  }
  CurveKeyPair keys;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string_view text = trim(line);
    if (text.empty() || text.front() == '#') continue;  // '#' only starts a line's comment: Z85 uses it
    const auto equals = text.find('=');
    if (equals == std::string_view::npos) continue;  // section names: "metadata", "curve"
    const std::string_view name = trim(text.substr(0, equals));
    if (name != "public-key" && name != "secret-key") continue;  // metadata entries
    const std::string_view rest = trim(text.substr(equals + 1));
    const auto close = rest.size() < 2 ? std::string_view::npos : rest.find('"', 1);
    const std::string_view after = close == std::string_view::npos ? "" : trim(rest.substr(close + 1));
    if (rest.empty() || rest.front() != '"' || close == std::string_view::npos ||
        !(after.empty() || after.front() == '#')) {
      throw_invalid("key file '" + path + "' line " + std::to_string(number) + ": " + std::string(name) +
                    " must be a quoted string");
    }
    const std::string_view value = rest.substr(1, close - 1);
    const std::string where = "key file '" + path + "' " + std::string(name);
    check_curve_key(value, where);
    (name == "public-key" ? keys.public_key : keys.secret_key) = value;
  }
  if (keys.public_key.empty()) throw_invalid("key file '" + path + "' has no public-key line");
  if (!keys.secret_key.empty()) {
    char derived[kCurveKeyChars + 1];
    if (zmq_curve_public(derived, keys.secret_key.c_str()) != 0 || keys.public_key != derived) {
      throw_invalid("key file '" + path + "': secret-key does not belong to public-key");
    }
  }
  return keys;
}

namespace transport {

void write_key_file(const std::string& path, const std::string& text, mode_t mode, std::string_view what) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  bool ok = fd >= 0 && ::fchmod(fd, mode) == 0;
  size_t written = 0;
  while (ok && written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) written += static_cast<size_t>(n);
  }
  const int saved_errno = errno;
  if (fd >= 0) ok = ::close(fd) == 0 && ok;
  if (!ok) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(what) + " '" + path + "' cannot be written: " + std::strerror(saved_errno));
  }
}

ZapHandler::ZapHandler(zmq::context_t& context, const std::vector<std::string>& service_keys,
                       const std::vector<std::string>& client_keys) {
  for (const auto& key : service_keys) {
    check_curve_key(key, "service key");
    services_.insert(decode_key(key));
  }
  for (const auto& key : client_keys) {
    check_curve_key(key, "allowed_client_keys entry");
    clients_.insert(decode_key(key));
  }
  zmq::socket_t handler(context, zmq::socket_type::rep);
  handler.set(zmq::sockopt::linger, 0);
  handler.bind(kZapEndpoint);  // fails if the context already has a handler
  // A per-instance address: the stop signal reaches only this handler.
  const std::string stop_endpoint = "inproc://seqflow-zap-stop-" + std::to_string(reinterpret_cast<uintptr_t>(this));
  zmq::socket_t stop_receiver(context, zmq::socket_type::pair);
  stop_receiver.set(zmq::sockopt::linger, 0);
  stop_receiver.bind(stop_endpoint);
  stop_sender_ = zmq::socket_t(context, zmq::socket_type::pair);
  stop_sender_.set(zmq::sockopt::linger, 0);
  stop_sender_.connect(stop_endpoint);
  // The sockets move to the handler thread; thread creation is the memory
  // barrier ZeroMQ asks for when a socket changes threads.
  thread_ = std::thread(&ZapHandler::serve, this, std::move(handler), std::move(stop_receiver));
}

ZapHandler::~ZapHandler() { stop(); }

void ZapHandler::stop() {
  if (!thread_.joinable()) return;
  stop_sender_.send(zmq::message_t(), zmq::send_flags::dontwait);
  thread_.join();
  stop_sender_.close();
}

// ZAP (RFC 27): request [version, request id, domain, address, identity,
// mechanism, credentials...]; reply [version, request id, status code,
// status text, user id, metadata]. The user id is the role.
void ZapHandler::serve(zmq::socket_t handler, zmq::socket_t stop_receiver) {
  zmq::pollitem_t items[] = {{handler.handle(), 0, ZMQ_POLLIN, 0}, {stop_receiver.handle(), 0, ZMQ_POLLIN, 0}};
  while (true) {
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(-1));
    } catch (const zmq::error_t& error) {
      if (error.num() == EINTR) continue;
      return;
    }
    if (items[1].revents & ZMQ_POLLIN) return;
    if (!(items[0].revents & ZMQ_POLLIN)) continue;
    Frames request;
    do {
      zmq::message_t part;
      if (!handler.recv(part, zmq::recv_flags::dontwait)) break;
      request.push_back(std::move(part));
    } while (request.back().more());
    if (request.empty()) continue;

    std::string_view role;  // empty: denied
    if (request.size() >= 7 && as_string_view(request[0]) == "1.0" && as_string_view(request[5]) == "CURVE" &&
        request[6].size() == 32) {
      std::array<uint8_t, 32> key{};
      std::memcpy(key.data(), request[6].data(), key.size());
      if (services_.count(key) > 0) {
        role = kServiceUserId;
      } else if (clients_.count(key) > 0) {
        role = kClientUserId;
      }
    }
    const bool allowed = !role.empty();
    const std::string_view request_id = request.size() >= 2 ? as_string_view(request[1]) : "";
    const char* status = allowed ? "200" : "400";
    const char* text = allowed ? "OK" : "client key not allowed";
    handler.send(copy_frame(std::string_view("1.0")), zmq::send_flags::sndmore);
    handler.send(copy_frame(request_id), zmq::send_flags::sndmore);
    handler.send(copy_frame(std::string_view(status)), zmq::send_flags::sndmore);
    handler.send(copy_frame(std::string_view(text)), zmq::send_flags::sndmore);
    handler.send(copy_frame(role), zmq::send_flags::sndmore);
    handler.send(zmq::message_t(), zmq::send_flags::none);
  }
}

}  // namespace transport
}  // namespace seqflow
