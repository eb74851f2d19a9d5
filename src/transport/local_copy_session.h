// Who may copy whose memory on one host. A same-host copy reads another
// process's memory (local_copy.h); which process is never taken from a
// message. A client opens a session with a storage unit over a Unix-domain
// socket in the abstract namespace, and the kernel tells each side the
// other's pid (SO_PEERCRED): the unit reads only the memory of the client
// that opened the session, the client only the memory of the unit it
// connected to.
//
//   client                                   unit (SessionListener)
//   connect(address) ----------------------> accept: client pid from SO_PEERCRED
//                    <---------------------- session id (16 random bytes, the
//                                            unit's), its token's address and
//                                            bytes, the session key (16 random bytes)
//   unit pid from SO_PEERCRED; reads the
//   unit's token (can it copy from it?)
//   its own token's address and bytes ---->  reads the client's token (can it
//                    <---------------------- copy from it?): 1 or 0
//
// Requests then name the session id, which only the two ends know (the
// unit's random bytes, never sent anywhere else): a peer that makes up or
// guesses one is refused, and no request can point the unit at another
// process, its own included. A request that makes the unit read the client
// (a put) also carries a sequence number and a tag, SipHash of the request's
// ranges under the session key: the id alone, which a peer the client put
// to over TCP may have seen (a hostile endpoint registered as a unit),
// names no ranges of its choosing, and no request is taken twice (a replay
// would read whatever the client holds there by then). The session ends when its socket closes (the
// client closed it or died), and every read first finds the client's
// token where the handshake showed it, so a pid that now names another
// process (the client died while a child kept the socket, or it exec'd) is
// never read.
//
// Abstract Unix sockets belong to a network namespace, so a client on
// another host or in another network namespace cannot connect; a pid that
// the other side's pid namespace cannot see is 0 and refused. Either way the
// client sends the bytes over TCP instead.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/siphash.h"

namespace seqflow::transport::local_copy {

using SessionId = std::array<uint8_t, 16>;

// A unit's end: a listening socket and a thread that opens and ends sessions.
class SessionListener {
 public:
  // More open sessions than this are refused (the client uses TCP): each
  // holds a file descriptor.
  static constexpr size_t kMaxSessions = 4096;  // or a quarter of the process's file limit, if lower
  // A client that stalls its handshake longer is dropped.
  static constexpr std::chrono::milliseconds kHandshakeTimeout{2000};

  SessionListener();  // binds and starts; throws kInternal when it cannot
  ~SessionListener();
  SessionListener(const SessionListener&) = delete;
  SessionListener& operator=(const SessionListener&) = delete;

  // The abstract socket name (without its leading NUL) clients connect to.
  const std::string& address() const { return address_; }
  // The pid of the process that opened `session`, when this process can
  // read its memory and `tag` is the SipHash of `message` under the
  // session's key and `sequence` (which `message` holds) was not taken
  // before; nullopt for an unknown, ended or unreadable session, a wrong
  // tag, a sequence taken before or too old (more than kReplayWindow below
  // the highest), and for a session whose process no longer holds the token
  // it showed in the handshake (it exited and the pid was reused, or it
  // exec'd another program): checked on every call, right before the caller
  // reads.
  std::optional<pid_t> reader_of(std::span<const uint8_t> session, uint64_t sequence, std::span<const uint8_t> message,
                                 uint64_t tag);
  static constexpr uint64_t kReplayWindow = 1024;
  // Whether `session` is open (its client may copy from this process).
  bool is_open(std::span<const uint8_t> session) const;
  size_t open_sessions() const;

 private:
  struct Session {
    pid_t pid;
    bool readable;  // this process can read the client's memory
    int fd;
    std::array<uint8_t, 24> token;  // the client's token message: address and bytes
    SipKey key;
    // Sequences taken: the highest, and a bit per one below it in the window.
    uint64_t highest = 0;
    std::array<uint64_t, kReplayWindow / 64> taken{};
  };
  // Under mutex_: takes `sequence` unless it was taken or is too old.
  static bool take_sequence(Session& session, uint64_t sequence);
  struct IdHash {
    size_t operator()(const SessionId& id) const;
  };
  // A client whose handshake is under way (the listener thread's alone).
  struct Handshake {
    int fd = -1;
    pid_t pid = 0;
    SessionId id{};
    SipKey key{};
    std::array<uint8_t, 24> token{};  // the client's token message, as far as it came
    size_t received = 0;
    std::chrono::steady_clock::time_point deadline;
  };
  void run();
  void accept_one();
  bool continue_handshake(Handshake& pending);

  std::string address_;
  size_t max_sessions_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // eventfd
  mutable std::mutex mutex_;
  std::unordered_map<SessionId, Session, IdHash> sessions_;
  std::vector<Handshake> handshakes_;
  std::thread thread_;
};

// A client's end of one session. Owned by the process that opened it: a
// forked child must open its own (owner() tells whose it is).
class Session {
 public:
  // Connects to a unit's `address` and runs the handshake within `timeout`.
  // nullopt when no session can be had (another network namespace, a pid
  // the other side cannot see, the unit refused or is gone); `why` says why.
  static std::unique_ptr<Session> open(const std::string& address, std::chrono::milliseconds timeout,
                                       std::string* why = nullptr);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const SessionId& id() const { return id_; }
  const SipKey& key() const { return key_; }
  // A new sequence number for a request signed under key(), from 1 up.
  uint64_t next_sequence() const { return sequence_.fetch_add(1) + 1; }
  pid_t unit_pid() const { return unit_pid_; }        // as the kernel reported it
  bool reads_unit() const { return reads_unit_; }     // this process can copy from the unit
  bool unit_reads_us() const { return unit_reads_; }  // the unit can copy from this process
  pid_t owner() const { return owner_; }
  // Whether the unit still holds the session (it closes the socket when it
  // stops or restarts) and this process opened it.
  bool usable() const;

 private:
  Session() = default;
  int fd_ = -1;
  SessionId id_{};
  SipKey key_{};
  mutable std::atomic<uint64_t> sequence_{0};
  pid_t unit_pid_ = 0;
  bool reads_unit_ = false;
  bool unit_reads_ = false;
  pid_t owner_ = 0;
};

}  // namespace seqflow::transport::local_copy
