// Makes the n-th allocation of this thread fail (operator new throws
// std::bad_alloc) while a FailNthAllocation lives: an operation run with n =
// 1, 2, 3, ... until it completes has run out of memory at each of its
// allocations in turn. failing_allocations.cc replaces operator new for the
// executables that add it (CMakeLists.txt: the core and storage tests);
// unarmed, it is malloc.
#pragma once

#include <cstddef>
#include <functional>

namespace seqflow::test {

class FailNthAllocation {
 public:
  explicit FailNthAllocation(size_t nth);
  ~FailNthAllocation();
  FailNthAllocation(const FailNthAllocation&) = delete;
  FailNthAllocation& operator=(const FailNthAllocation&) = delete;

  // Whether the n-th allocation came (and failed).
  bool fired() const;
};

// One try of an operation with its n-th allocation failing: whether the
// n-th allocation came, and whether std::bad_alloc reached the caller (an
// operation may survive a failed allocation).
struct FailedAllocationTry {
  bool fired = false;
  bool raised = false;
};
FailedAllocationTry with_nth_allocation_failing(size_t nth, const std::function<void()>& call);

}  // namespace seqflow::test
