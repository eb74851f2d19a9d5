// Same-host transfers without the network stack. When a client and a
// storage unit run on one host, the receiver of a message's data frames
// copies them straight out of the sender's memory (process_vm_readv: one
// copy, made by the kernel) instead of receiving them over TCP (a copy into
// the socket, one out of it, and the stack in between). The message then
// carries only where the frames lie: a description.
//
// The sender keeps the described frames alive until the receiver is done:
// a client's put waits for the reply; a storage unit holds the frames of a
// get reply under a lease (FrameLeases) that the client gives back after
// reading.
//
// A description names only ranges: which process they lie in is never taken
// from a message but from the session the two ends opened, in which the
// kernel vouched for each side's pid (local_copy_session.h). A put's
// description carries its session's id, so that the unit knows whose memory
// it may read.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "transport/frames.h"
#include "transport/local_copy_session.h"
#include "transport/wire_codec.h"

namespace seqflow::transport::local_copy {

// Below this many data bytes a message carries its frames: the copy would
// save less than the extra work (and, for a get, the extra round trip).
inline constexpr size_t kMinBytes = size_t{256} << 10;

// Data bytes of frames[first..].
size_t data_bytes(const Frames& frames, size_t first);

// frames[first..] as this process sees them: each frame's address and size,
// as an encoded value (wire_codec.h) of a message. The frames must not
// change until the reader is done with them.
std::string describe(const Frames& frames, size_t first);
// Frames not made yet: frame i would be the ranges frames[i] back to back
// (the reader assembles it, so the sender need not).
std::string describe(std::span<const std::vector<std::span<const std::byte>>> frames);

// A put's description, signed for the unit of `session`: its id, a new
// sequence number and the tag (SipHash under the session key) of both and
// the ranges, so that only this client can name ranges of its memory to
// the unit, each description once.
std::string seal(std::string_view description, const Session& session);
// The same with the session's parts, for a sequence of the caller's.
std::string seal(std::string_view description, const SessionId& session, const SipKey& key, uint64_t sequence);
// The client whose memory a sealed description names, vouched for by the
// unit's session listener (SessionListener::reader_of); nullopt when the
// description is not sealed, or its session, tag or sequence is refused.
// Throws kInvalidArgument on a malformed description.
std::optional<pid_t> sealed_reader(SessionListener& sessions, std::string_view description, std::string_view what);

// Copies the described frames out of process `peer` (the session's other
// end, never a pid from a message) into fresh buffers, returned as frames
// that own them. Throws kInvalidArgument, before allocating, when the
// description is malformed, names other than `frame_count` frames or more
// than `max_bytes` bytes; and when it names memory the peer does not have.
Frames read(pid_t peer, std::string_view description, std::string_view what, size_t frame_count, size_t max_bytes);

// Frames that stand in for the described ones: each has the described
// address and size, but its bytes live in the peer. They are only laid out
// (e.g. by wire::take_views) to find where each value lies; read_pieces
// copies the values. Throws kInvalidArgument on a malformed description.
Frames placeholders(std::string_view description, std::string_view what);

// One range to copy: `from` is an address in the described peer.
struct Piece {
  const std::byte* from;
  std::byte* to;
  size_t size;
};
// Copies the pieces out of process `peer` (adjacent pieces in one go).
// Throws kInvalidArgument naming `what` when the peer does not have them.
void read_pieces(pid_t peer, std::span<const Piece> pieces, std::string_view what);

}  // namespace seqflow::transport::local_copy
