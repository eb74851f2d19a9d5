#include "transport/local_copy.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include "seqflow/error.h"
#include "common/aligned_buffer.h"
#include "common/split_copy.h"

namespace seqflow::transport::local_copy {
namespace {

struct Description {
  std::vector<uint64_t> ranges;  // (address, size) pairs
  // Ranges per frame, in order; empty: one each.
  std::vector<uint32_t> pieces;

  size_t frame_count() const { return pieces.empty() ? ranges.size() / 2 : pieces.size(); }
};

// A description: the value of a message's key (or, from the fuzzer, a whole header).
EncodedMap header_of(std::string_view description, std::string_view what) {
  return EncodedMap(description, wire::kValueDepth, what, {"session", "sequence", "tag", "frames", "pieces"});
}

// What a seal signs: the sequence number, then each of the ranges' fields
// as sent, after its length (so that no bytes can move from one to the
// other under the same tag; an absent field has length 0).
std::vector<uint8_t> signed_message(const EncodedMap& header, uint64_t sequence) {
  std::string_view fields[2];
  const char* names[2] = {"frames", "pieces"};
  for (size_t f = 0; f < 2; ++f) {
    if (!header.has(names[f])) continue;
    if (header.token(names[f]).kind != MsgpackReader::Kind::kBinary) header.fail(names[f], "must be binary");
    fields[f] = header.binary(names[f]);
  }
  std::vector<uint8_t> message(3 * sizeof(uint64_t) + fields[0].size() + fields[1].size());
  size_t at = 0;
  const auto append = [&message, &at](const void* bytes, size_t size) {
    if (size > 0) std::memcpy(message.data() + at, bytes, size);
    at += size;
  };
  append(&sequence, sizeof(sequence));
  for (const std::string_view field : fields) {
    const uint64_t size = field.size();
    append(&size, sizeof(size));
    append(field.data(), field.size());
  }
  return message;
}

Description parse(std::string_view description, std::string_view what) {
  const EncodedMap header = header_of(description, what);
  Description out{header.numbers<uint64_t>("frames"), {}};
  if (out.ranges.size() % 2 != 0) header.fail("frames", "must hold (address, size) pairs");
  if (header.has("pieces")) {
    out.pieces = header.numbers<uint32_t>("pieces");
    uint64_t count = 0;
    for (const uint32_t n : out.pieces) count += n;
    if (count != out.ranges.size() / 2) header.fail("pieces", "must count every range of \"frames\" once");
  }
  return out;
}

// Copies remote[i] into local[i] (equal sizes), IOV_MAX entries per call;
// a call may stop early, between or inside entries, so each continues
// where the last one stopped. Returns errno, or 0.
int read_process(pid_t pid, std::vector<iovec> local, std::vector<iovec> remote) {
  size_t at = 0;
  while (at < local.size()) {
    if (local[at].iov_len == 0) {
      ++at;
      continue;
    }
    const size_t count = std::min<size_t>(local.size() - at, IOV_MAX);
    const ssize_t copied = process_vm_readv(pid, &local[at], count, &remote[at], count, 0);
    if (copied < 0) return errno;
    if (copied == 0) return EFAULT;
    for (auto left = static_cast<size_t>(copied); left > 0;) {
      const size_t step = std::min(left, local[at].iov_len);
      for (iovec* entry : {&local[at], &remote[at]}) {
        entry->iov_base = static_cast<std::byte*>(entry->iov_base) + step;
        entry->iov_len -= step;
      }
      left -= step;
      if (local[at].iov_len == 0) ++at;
    }
  }
  return 0;
}

// Large copies are split between threads (common/split_copy.h): the kernel
// pins the peer's pages a few at a time under its memory-map lock, so one
// thread moves ~5 GB/s out of 4 KiB pages, less than memory can.
constexpr size_t kBytesPerThread = size_t{32} << 20;
constexpr size_t kMaxThreads = 4;

}  // namespace

size_t data_bytes(const Frames& frames, size_t first) {
  size_t total = 0;
  for (size_t i = first; i < frames.size(); ++i) total += frames[i].size();
  return total;
}

std::string describe(std::span<const std::vector<std::span<const std::byte>>> frames) {
  std::vector<uint64_t> ranges;
  std::vector<uint32_t> pieces;
  pieces.reserve(frames.size());
  for (const auto& frame : frames) {
    pieces.push_back(static_cast<uint32_t>(frame.size()));
    for (const auto& piece : frame) {
      ranges.push_back(reinterpret_cast<uintptr_t>(piece.data()));
      ranges.push_back(piece.size());
    }
  }
  MsgpackMapWriter description;
  description.set("frames").numbers(std::span<const uint64_t>(ranges));
  description.set("pieces").numbers(std::span<const uint32_t>(pieces));
  return description.bytes();
}

std::string describe(const Frames& frames, size_t first) {
  std::vector<std::vector<std::span<const std::byte>>> whole;
  for (size_t i = first; i < frames.size(); ++i) whole.push_back({as_bytes(frames[i])});
  return describe(whole);
}

std::string seal(std::string_view description, const Session& session) {
  return seal(description, session.id(), session.key(), session.next_sequence());
}

std::string seal(std::string_view description, const SessionId& session, const SipKey& key, uint64_t sequence) {
  const EncodedMap ranges = header_of(description, "description");
  const uint64_t tag = siphash24(key, signed_message(ranges, sequence));
  MsgpackMapWriter sealed;
  for (const std::string_view field : {"frames", "pieces"}) {
    if (ranges.has(field)) sealed.set(field).encoded(ranges.value(field));
  }
  sealed.set("session").numbers(std::span<const uint8_t>(session));
  sealed.set("sequence").unsigned_integer(sequence);
  sealed.set("tag").unsigned_integer(tag);
  return sealed.bytes();
}

std::optional<pid_t> sealed_reader(SessionListener& sessions, std::string_view description, std::string_view what) {
  const EncodedMap header = header_of(description, what);
  if (!header.has("session") || !header.has("sequence") || !header.has("tag")) return std::nullopt;
  if (header.token("session").kind != MsgpackReader::Kind::kBinary) {
    header.fail("session", "must be a binary session id");
  }
  const std::string_view session = header.binary("session");
  const auto sequence = static_cast<uint64_t>(header.integer("sequence"));
  const MsgpackReader::Token tag = header.token("tag");
  if (tag.kind != MsgpackReader::Kind::kUnsigned && tag.kind != MsgpackReader::Kind::kSigned) {
    header.fail("tag", "must be an integer");
  }
  return sessions.reader_of(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(session.data()), session.size()), sequence,
      signed_message(header, sequence),
      tag.kind == MsgpackReader::Kind::kUnsigned ? tag.number : static_cast<uint64_t>(tag.integer));
}

Frames read(pid_t peer_pid, std::string_view description, std::string_view what, size_t frame_count, size_t max_bytes) {
  const Description peer = parse(description, what);
  const auto& ranges = peer.ranges;
  if (peer.frame_count() != frame_count) {
    header_of(description, what)
        .fail("frames", "describes " + std::to_string(peer.frame_count()) + " frames, not the " +
                            std::to_string(frame_count) + " the message needs");
  }
  std::vector<size_t> sizes;  // per frame
  size_t total = 0;
  for (size_t r = 0, frame = 0; frame < frame_count; ++frame) {
    const size_t end = r + (peer.pieces.empty() ? 1 : peer.pieces[frame]);
    size_t size = 0;
    for (; r < end; ++r) {
      const uint64_t piece = ranges[2 * r + 1];
      if (piece > max_bytes - total) {
        header_of(description, what)
            .fail("frames", "describes more than the limit of " + std::to_string(max_bytes) + " bytes");
      }
      total += piece;
      size += piece;
    }
    sizes.push_back(size);
  }
  std::vector<WritableBuffer> buffers;
  std::vector<Piece> pieces;
  buffers.reserve(frame_count);
  pieces.reserve(ranges.size() / 2);
  for (size_t r = 0, frame = 0; frame < frame_count; ++frame) {
    buffers.push_back(allocate_buffer(sizes[frame]));
    std::byte* to = buffers.back().data;
    const size_t end = r + (peer.pieces.empty() ? 1 : peer.pieces[frame]);
    for (; r < end; ++r) {
      pieces.push_back(
          {reinterpret_cast<const std::byte*>(static_cast<uintptr_t>(ranges[2 * r])), to, ranges[2 * r + 1]});
      to += ranges[2 * r + 1];
    }
  }
  read_pieces(peer_pid, pieces, what);
  Frames frames;
  frames.reserve(buffers.size());
  for (WritableBuffer& buffer : buffers) {
    const size_t size = buffer.buffer->size;
    frames.push_back(frame_of(std::move(buffer.buffer), 0, size));
  }
  return frames;
}

Frames placeholders(std::string_view description, std::string_view what) {
  const Description peer = parse(description, what);
  if (peer.frame_count() != peer.ranges.size() / 2) {
    header_of(description, what).fail("pieces", "must be one per frame: a placeholder stands for one range");
  }
  Frames frames;
  frames.reserve(peer.ranges.size() / 2);
  for (size_t i = 0; i < peer.ranges.size(); i += 2) {
    const size_t size = peer.ranges[i + 1];
    // No free function: ZeroMQ only carries the pointer and never reads it.
    frames.push_back(size == 0 ? zmq::message_t()
                               : zmq::message_t(reinterpret_cast<void*>(static_cast<uintptr_t>(peer.ranges[i])), size,
                                                nullptr, nullptr));
  }
  return frames;
}

void read_pieces(pid_t peer, std::span<const Piece> pieces, std::string_view what) {
  std::vector<iovec> local, remote;
  for (const Piece& piece : pieces) {
    if (piece.size == 0) continue;
    if (!local.empty() && static_cast<std::byte*>(local.back().iov_base) + local.back().iov_len == piece.to &&
        static_cast<const std::byte*>(remote.back().iov_base) + remote.back().iov_len == piece.from) {
      local.back().iov_len += piece.size;
      remote.back().iov_len += piece.size;
      continue;
    }
    local.push_back({piece.to, piece.size});
    remote.push_back({const_cast<std::byte*>(piece.from), piece.size});
  }
  const auto read_part = [peer](const std::vector<iovec>& to, const std::vector<iovec>& from) {
    return read_process(peer, to, from);
  };
  if (const int error = copy_split(local, remote, kBytesPerThread, kMaxThreads, read_part); error != 0) {
    throw_invalid(std::string(what) + ": the described frames cannot be read from process " + std::to_string(peer) +
                  ": " + std::strerror(error));
  }
}

}  // namespace seqflow::transport::local_copy
