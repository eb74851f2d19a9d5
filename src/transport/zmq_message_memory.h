// Where libzmq keeps large messages. libzmq mallocs every message it
// receives; glibc maps any allocation above 32 MiB afresh, and the kernel
// then faults it in 4 KiB at a time while the bytes arrive. On a 2-core VM
// that cost a 64 MiB get 16,385 page faults and held it to 0.86x of a
// 10 Gbit/s link. With this, libzmq's allocations of kLargeMessageBytes and
// more come from the BlockCache instead: blocks reused from one message to
// the next, already faulted in (huge pages from 2 MiB on).
//
// It works by pointing libzmq's own imports of malloc, free and realloc
// (their relocation slots in the loaded library, as UCX's memory hooks do)
// at the functions below, before the first socket starts libzmq's threads
// (and after calling each import once, so that no lazily bound slot is
// being resolved meanwhile). Nothing else in the process changes: other
// libraries, and the process's own malloc, are untouched (another user of
// the same loaded libzmq, such as a pyzmq built against it, shares the
// cache); allocations below the threshold and every pointer the cache did
// not hand out go to the C library as before.
#pragma once

#include <cstddef>

namespace seqflow::transport {

// From here on the C library would map, or soon unmap, a message's memory:
// a put's runs of samples are frames of 64 KiB to a few MiB.
inline constexpr size_t kLargeMessageBytes = size_t{64} << 10;

// Redirects libzmq's allocations once per process (later calls only return
// the first result); thread-safe. False, with nothing changed, where libzmq
// is not a shared library of its own whose imports this can find (linked
// statically into the program or into the object holding this code; an
// architecture other than x86-64 and AArch64; on AArch64, imports not
// bound yet, as a library loaded without BIND_NOW has them).
bool keep_large_zmq_messages_in_block_cache();

// What libzmq now calls, exposed for tests: malloc, free and realloc with
// the C library's contracts.
namespace zmq_message_memory {
void* allocate(size_t size);
void release(void* pointer);
void* reallocate(void* pointer, size_t size);
// Whether `pointer` is a block allocate() handed out and release() has not
// taken back.
bool from_block_cache(const void* pointer);
}  // namespace zmq_message_memory

}  // namespace seqflow::transport
