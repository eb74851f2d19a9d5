// operator new for the core tests: malloc, failing once on the thread that
// armed a FailNthAllocation (failing_allocations.h).
#include "failing_allocations.h"

#include <cstdlib>
#include <new>

namespace {

thread_local size_t countdown = 0;  // allocations until the failing one; 0: unarmed
thread_local bool failed = false;

void* allocate(std::size_t size) {
  if (countdown != 0 && --countdown == 0) {
    failed = true;
    throw std::bad_alloc();
  }
  if (void* memory = std::malloc(size == 0 ? 1 : size)) return memory;
  throw std::bad_alloc();
}

}  // namespace

namespace seqflow::test {

FailNthAllocation::FailNthAllocation(size_t nth) {
  failed = false;
  countdown = nth;
}

FailNthAllocation::~FailNthAllocation() { countdown = 0; }

bool FailNthAllocation::fired() const { return failed; }

}  // namespace seqflow::test

void* operator new(std::size_t size) { return allocate(size); }
void* operator new[](std::size_t size) { return allocate(size); }
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete[](void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }
void operator delete[](void* memory, std::size_t) noexcept { std::free(memory); }
