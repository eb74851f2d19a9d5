#include "common/split_copy.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <thread>

namespace seqflow {

int copy_split(const std::vector<iovec>& to, const std::vector<iovec>& from, size_t bytes_per_thread,
               size_t max_threads, const CopyPart& copy) {
  size_t total = 0;
  for (const iovec& entry : to) total += entry.iov_len;
  const size_t threads = std::min({total / std::max<size_t>(bytes_per_thread, 1), max_threads,
                                   static_cast<size_t>(std::max(1u, std::thread::hardware_concurrency()))});
  if (threads <= 1) return copy(to, from);
  const size_t share = (total + threads - 1) / threads;
  std::vector<std::vector<iovec>> to_parts(threads), from_parts(threads);
  size_t part = 0, filled = 0;
  for (size_t i = 0; i < to.size(); ++i) {
    auto* into = static_cast<std::byte*>(to[i].iov_base);
    auto* out_of = static_cast<std::byte*>(from[i].iov_base);
    for (size_t left = to[i].iov_len; left > 0;) {
      const size_t take = part + 1 == threads ? left : std::min(left, share - filled);
      to_parts[part].push_back({into, take});
      from_parts[part].push_back({out_of, take});
      into += take;
      out_of += take;
      left -= take;
      filled += take;
      if (filled == share && part + 1 < threads) {
        ++part;
        filled = 0;
      }
    }
  }
  // A part's exception is taken to this thread: it leaves once every helper is joined.
  std::vector<int> results(threads, 0);
  std::vector<std::exception_ptr> failures(threads);
  std::vector<std::thread> helpers;
  helpers.reserve(threads - 1);
  const auto run = [&](size_t t) {
    try {
      results[t] = copy(to_parts[t], from_parts[t]);
    } catch (...) {
      failures[t] = std::current_exception();
    }
  };
  for (size_t t = 1; t < threads; ++t) {
    try {
      helpers.emplace_back(run, t);
    } catch (...) {
      run(t);  // no thread to be had (or no memory for one): this one does the part
    }
  }
  run(0);
  for (std::thread& helper : helpers) helper.join();
  for (const std::exception_ptr& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
  for (const int result : results) {
    if (result != 0) return result;
  }
  return 0;
}

int copy_in_memory(const std::vector<iovec>& to, const std::vector<iovec>& from) {
  for (size_t i = 0; i < to.size(); ++i) {
    if (to[i].iov_len > 0) std::memcpy(to[i].iov_base, from[i].iov_base, to[i].iov_len);
  }
  return 0;
}

}  // namespace seqflow
