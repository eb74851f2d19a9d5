// Unix sockets of the same-host copy's sessions: addresses in the abstract
// namespace and blocking I/O bounded by a deadline (the sockets are
// non-blocking, so a stalled peer never holds a thread past it).
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace seqflow::transport::local_copy {

using Clock = std::chrono::steady_clock;

// `name` in the abstract namespace (no file; gone with the socket); `length`
// is set to the address's length.
sockaddr_un abstract_address(const std::string& name, socklen_t& length);
// Waits for `events` on fd until the deadline; false once it has passed.
bool wait_for(int fd, short events, Clock::time_point deadline);
// All `size` bytes, or false when the peer closed, failed or was too slow.
bool send_all(int fd, const uint8_t* data, size_t size, Clock::time_point deadline);
bool receive_all(int fd, uint8_t* data, size_t size, Clock::time_point deadline);
// The peer's pid as the kernel vouches for it; 0 when it is not visible from
// this pid namespace.
pid_t peer_pid(int fd);

}  // namespace seqflow::transport::local_copy
