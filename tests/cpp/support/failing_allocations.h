// Makes the n-th allocation of this thread fail (operator new throws
// std::bad_alloc) while a FailNthAllocation lives: an operation run with n =
// 1, 2, 3, ... until it completes has run out of memory at each of its
// allocations in turn. failing_allocations.cc replaces operator new for the
// executables that add it (CMakeLists.txt: the core and storage tests);
// unarmed, it is malloc.
#pragma once

#include <cstddef>

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

}  // namespace seqflow::test
