#include "transport/local_copy_session.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

#include "common/constant_time.h"
#include "common/random_id.h"
#include "seqflow/error.h"
#include "transport/unix_socket.h"

namespace seqflow::transport::local_copy {
namespace {

using Token = std::array<uint8_t, 16>;

// 16 bytes at a fixed address of this process: the other side of a session
// copies them to learn whether it may copy from this process at all.
const Token& own_token() {
  static const Token token = random_bytes<sizeof(Token)>();
  return token;
}

SessionId random_id() { return random_bytes<sizeof(SessionId)>(); }

// [address (8 bytes, little endian), token (16)]
constexpr size_t kTokenMessageBytes = 8 + sizeof(Token);

void write_token(uint8_t* out) {
  const auto address = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(own_token().data()));
  std::memcpy(out, &address, 8);
  std::memcpy(out + 8, own_token().data(), sizeof(Token));
}

// Whether this process can copy the token the other side described out of
// process `pid`, and finds it there.
bool can_read(pid_t pid, const uint8_t* token_message) {
  uint64_t address = 0;
  std::memcpy(&address, token_message, 8);
  Token found{};
  iovec local{found.data(), found.size()};
  iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(address)), found.size()};
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(found.size())) return false;
  return std::memcmp(found.data(), token_message + 8, found.size()) == 0;
}

std::string hex(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (const uint8_t b : bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

}  // namespace

size_t SessionListener::IdHash::operator()(const SessionId& id) const {
  size_t hash = 0;
  std::memcpy(&hash, id.data(), sizeof(hash));
  return hash;
}

namespace {

// Sessions hold a descriptor each: at most a quarter of the process's limit.
size_t session_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return SessionListener::kMaxSessions;
  return std::min<size_t>(SessionListener::kMaxSessions, static_cast<size_t>(limit.rlim_cur / 4));
}

}  // namespace

SessionListener::SessionListener()
    : address_("seqflow-local-copy-" + hex(random_id())), max_sessions_(session_limit()) {
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t length = 0;
  const sockaddr_un address = abstract_address(address_, length);
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&address), length) != 0 ||
      ::listen(listen_fd_, 128) != 0) {
    const int error = errno;
    if (listen_fd_ >= 0) ::close(listen_fd_);
    throw Error(ErrorCode::kInternal,
                "local copy: cannot listen on a Unix socket: " + std::string(std::strerror(error)));
  }
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (stop_fd_ < 0) {
    const int error = errno;
    ::close(listen_fd_);
    throw Error(ErrorCode::kInternal, "local copy: eventfd failed: " + std::string(std::strerror(error)));
  }
  thread_ = std::thread(&SessionListener::run, this);
}

SessionListener::~SessionListener() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(stop_fd_, &one, sizeof(one));
  thread_.join();
  for (const Handshake& pending : handshakes_) ::close(pending.fd);
  for (const auto& [id, session] : sessions_) ::close(session.fd);
  ::close(listen_fd_);
  ::close(stop_fd_);
}

bool SessionListener::take_sequence(Session& session, uint64_t sequence) {
  if (sequence == 0) return false;
  if (sequence > session.highest) {
    const uint64_t shift = sequence - session.highest;
    // Bit i of the window is sequence highest - i: move it up by `shift`.
    std::array<uint64_t, kReplayWindow / 64> moved{};
    for (uint64_t bit = 0; bit + shift < kReplayWindow; ++bit) {
      if ((session.taken[bit / 64] >> (bit % 64)) & 1U)
        moved[(bit + shift) / 64] |= uint64_t{1} << ((bit + shift) % 64);
    }
    session.taken = moved;
    session.highest = sequence;
    session.taken[0] |= 1U;
    return true;
  }
  const uint64_t age = session.highest - sequence;
  if (age >= kReplayWindow) return false;
  uint64_t& word = session.taken[age / 64];
  const uint64_t bit = uint64_t{1} << (age % 64);
  if (word & bit) return false;
  word |= bit;
  return true;
}

std::optional<pid_t> SessionListener::reader_of(std::span<const uint8_t> session, uint64_t sequence,
                                                std::span<const uint8_t> message, uint64_t tag) {
  if (session.size() != SessionId().size()) return std::nullopt;
  SessionId id;
  std::copy(session.begin(), session.end(), id.begin());
  SipKey key;
  {
    std::lock_guard lock(mutex_);
    const auto at = sessions_.find(id);
    if (at == sessions_.end() || !at->second.readable) return std::nullopt;
    key = at->second.key;
  }
  // Hashed outside the lock: a large put's ranges take a while.
  const uint64_t expected = siphash24(key, message);
  const std::string_view expected_bytes(reinterpret_cast<const char*>(&expected), sizeof(expected));
  const std::string_view tag_bytes(reinterpret_cast<const char*>(&tag), sizeof(tag));
  if (!equal_in_constant_time(tag_bytes, expected_bytes)) return std::nullopt;
  pid_t pid = 0;
  std::array<uint8_t, 24> token{};
  {
    std::lock_guard lock(mutex_);
    const auto at = sessions_.find(id);  // it may have ended meanwhile
    if (at == sessions_.end() || !take_sequence(at->second, sequence)) return std::nullopt;
    pid = at->second.pid;
    token = at->second.token;
  }
  if (!can_read(pid, token.data())) return std::nullopt;
  return pid;
}

bool SessionListener::is_open(std::span<const uint8_t> session) const {
  if (session.size() != SessionId().size()) return false;
  SessionId id;
  std::copy(session.begin(), session.end(), id.begin());
  std::lock_guard lock(mutex_);
  return sessions_.count(id) > 0;
}

size_t SessionListener::open_sessions() const {
  std::lock_guard lock(mutex_);
  return sessions_.size();
}

void SessionListener::run() {
  std::vector<pollfd> items;
  std::vector<SessionId> ids;  // of the open sessions' items, after the pending handshakes'
  while (true) {
    items.assign({{stop_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}});
    for (const Handshake& pending : handshakes_) items.push_back({pending.fd, POLLIN, 0});
    const size_t first_session = items.size();
    ids.clear();
    {
      std::lock_guard lock(mutex_);
      for (const auto& [id, session] : sessions_) {
        items.push_back({session.fd, POLLIN, 0});
        ids.push_back(id);
      }
    }
    int timeout_ms = -1;
    if (!handshakes_.empty()) {
      auto earliest = handshakes_.front().deadline;
      for (const Handshake& pending : handshakes_) earliest = std::min(earliest, pending.deadline);
      timeout_ms = static_cast<int>(
          std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(earliest - Clock::now()).count()));
    }
    if (::poll(items.data(), items.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (items[0].revents != 0) return;
    // Handshakes step by step, never waiting on one client: a local process
    // that stalls its handshake delays no one else's.
    std::vector<Handshake> waiting;
    for (size_t i = 0; i < handshakes_.size(); ++i) {
      Handshake& pending = handshakes_[i];
      if (items[2 + i].revents != 0 && !continue_handshake(pending)) continue;  // finished or failed
      if (pending.fd < 0) continue;
      if (Clock::now() >= pending.deadline) {
        ::close(pending.fd);
        continue;
      }
      waiting.push_back(pending);
    }
    handshakes_ = std::move(waiting);
    if (items[1].revents & POLLIN) accept_one();
    for (size_t i = first_session; i < items.size(); ++i) {
      if (items[i].revents == 0) continue;
      // A client sends nothing after its handshake: data or end of file ends
      // the session.
      uint8_t byte = 0;
      const ssize_t got = ::recv(items[i].fd, &byte, 1, MSG_DONTWAIT);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      std::lock_guard lock(mutex_);
      sessions_.erase(ids[i - first_session]);
      ::close(items[i].fd);
    }
  }
}

// The session's first message goes out at once (a new socket's buffer takes
// it whole); the client's token comes in as the poll loop sees it.
void SessionListener::accept_one() {
  const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    // Out of descriptors: the connection stays queued and poll reports it
    // again at once; pause rather than spin (its client times out, uses TCP).
    if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return;
  }
  Handshake pending;
  pending.fd = fd;
  pending.pid = peer_pid(fd);
  pending.id = random_id();
  pending.key = random_id();
  pending.deadline = Clock::now() + kHandshakeTimeout;
  uint8_t hello[sizeof(SessionId) + kTokenMessageBytes + sizeof(SipKey)];
  std::memcpy(hello, pending.id.data(), pending.id.size());
  write_token(hello + pending.id.size());
  std::memcpy(hello + pending.id.size() + kTokenMessageBytes, pending.key.data(), pending.key.size());
  const bool room = open_sessions() + handshakes_.size() < max_sessions_;
  if (!room || pending.pid <= 0 ||
      ::send(fd, hello, sizeof(hello), MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(sizeof(hello))) {
    ::close(fd);
    return;
  }
  handshakes_.push_back(pending);
}

// Reads what the client sent of its token; once it is whole, registers the
// session (before the client hears the answer: its first request may come
// right after, on another thread of this process) and answers whether this
// process can read the client. False when the handshake is over (done:
// pending.fd is then -1, or failed: closed).
bool SessionListener::continue_handshake(Handshake& pending) {
  const ssize_t got = ::recv(pending.fd, pending.token.data() + pending.received,
                             pending.token.size() - pending.received, MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
  if (got <= 0) {
    ::close(pending.fd);
    return false;
  }
  pending.received += static_cast<size_t>(got);
  if (pending.received < pending.token.size()) return true;
  Session session{pending.pid, can_read(pending.pid, pending.token.data()), pending.fd, pending.token, pending.key};
  {
    std::lock_guard lock(mutex_);
    sessions_.emplace(pending.id, session);
  }
  const uint8_t answer = session.readable ? 1 : 0;
  if (::send(pending.fd, &answer, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
    std::lock_guard lock(mutex_);
    sessions_.erase(pending.id);
    ::close(pending.fd);
  }
  pending.fd = -1;  // the session's now, or closed
  return false;
}

std::unique_ptr<Session> Session::open(const std::string& address, std::chrono::milliseconds timeout,
                                       std::string* why) {
  const auto fail = [why](std::string reason) -> std::unique_ptr<Session> {
    if (why) *why = std::move(reason);
    return nullptr;
  };
  if (address.empty() || address.size() + 1 > sizeof(sockaddr_un::sun_path)) {
    return fail("the unit's session address is malformed");
  }
  const auto deadline = Clock::now() + timeout;
  std::unique_ptr<Session> session(new Session());
  session->fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (session->fd_ < 0) return fail(std::string("socket: ") + std::strerror(errno));
  socklen_t length = 0;
  const sockaddr_un unit = abstract_address(address, length);
  if (::connect(session->fd_, reinterpret_cast<const sockaddr*>(&unit), length) != 0) {
    return fail(std::string("cannot reach the unit's session socket (another host or network namespace?): ") +
                std::strerror(errno));
  }
  session->unit_pid_ = peer_pid(session->fd_);
  if (session->unit_pid_ <= 0) return fail("the unit's process is not visible from this pid namespace");
  uint8_t hello[sizeof(SessionId) + kTokenMessageBytes + sizeof(SipKey)];
  if (!receive_all(session->fd_, hello, sizeof(hello), deadline)) return fail("the unit refused a session");
  std::memcpy(session->id_.data(), hello, session->id_.size());
  std::memcpy(session->key_.data(), hello + session->id_.size() + kTokenMessageBytes, session->key_.size());
  session->reads_unit_ = can_read(session->unit_pid_, hello + session->id_.size());
  uint8_t token[kTokenMessageBytes];
  write_token(token);
  uint8_t answer = 0;
  if (!send_all(session->fd_, token, sizeof(token), deadline) || !receive_all(session->fd_, &answer, 1, deadline)) {
    return fail("the unit ended the session's handshake");
  }
  session->unit_reads_ = answer == 1;
  session->owner_ = ::getpid();
  return session;
}

bool Session::usable() const {
  if (owner_ != ::getpid()) return false;
  pollfd item{fd_, POLLIN, 0};
  // The unit never writes after the handshake: anything readable is its end.
  return ::poll(&item, 1, 0) == 0;
}

Session::~Session() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace seqflow::transport::local_copy
