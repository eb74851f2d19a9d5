// Large copies split between threads. One thread moves less than memory
// can: process_vm_readv pins the peer's pages a few at a time, and a put to
// several units waits for its first unit's whole pack before any byte is sent.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <functional>
#include <vector>

namespace seqflow {

// Copies from[i] into to[i] (equal sizes); returns 0 or an errno.
using CopyPart = std::function<int(const std::vector<iovec>& to, const std::vector<iovec>& from)>;

// Runs `copy` over the pairs, split into parts of about equal bytes (a pair
// on a boundary cut in two) when there are at least 2 * bytes_per_thread:
// one part per thread, at most max_threads and the cores, this thread taking
// the first. Without a thread to be had, this one runs that part too.
// Returns the first nonzero result of a part, or 0; an exception of a part
// is rethrown here once every part has ended.
int copy_split(const std::vector<iovec>& to, const std::vector<iovec>& from, size_t bytes_per_thread,
               size_t max_threads, const CopyPart& copy);

// A CopyPart within this process: memcpy of each pair.
int copy_in_memory(const std::vector<iovec>& to, const std::vector<iovec>& from);

}  // namespace seqflow
