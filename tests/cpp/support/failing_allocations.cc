// operator new for the tests that add it (core, storage): malloc, failing once on the thread that
// armed a FailNthAllocation (failing_allocations.h). Every form is replaced
// (plain, array, nothrow, aligned), so that no allocation of this executable
// goes through the sanitizer's operator new and back through this delete.
#include "failing_allocations.h"

#include <cstdlib>
#include <new>

namespace {

thread_local size_t countdown = 0;  // allocations until the failing one; 0: unarmed
thread_local bool failed = false;

// The memory, or null when the armed allocation is this one or malloc fails.
void* try_allocate(std::size_t size, std::size_t alignment) noexcept {
  if (countdown != 0 && --countdown == 0) {
    failed = true;
    return nullptr;
  }
  if (size == 0) size = 1;
  if (alignment <= alignof(std::max_align_t)) return std::malloc(size);
  return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
}

void* allocate(std::size_t size, std::size_t alignment) {
  if (void* memory = try_allocate(size, alignment)) return memory;
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

FailedAllocationTry with_nth_allocation_failing(size_t nth, const std::function<void()>& call) {
  FailedAllocationTry attempt;
  const FailNthAllocation failing(nth);
  try {
    call();
  } catch (const std::bad_alloc&) {
    attempt.raised = true;
  }
  attempt.fired = failing.fired();
  return attempt;
}

}  // namespace seqflow::test

void* operator new(std::size_t size) { return allocate(size, 0); }
void* operator new[](std::size_t size) { return allocate(size, 0); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return try_allocate(size, 0); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return try_allocate(size, 0); }
void* operator new(std::size_t size, std::align_val_t alignment) {
  return allocate(size, static_cast<std::size_t>(alignment));
}
void* operator new[](std::size_t size, std::align_val_t alignment) {
  return allocate(size, static_cast<std::size_t>(alignment));
}
void* operator new(std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  return try_allocate(size, static_cast<std::size_t>(alignment));
}
void* operator new[](std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  return try_allocate(size, static_cast<std::size_t>(alignment));
}

void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete[](void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }
void operator delete[](void* memory, std::size_t) noexcept { std::free(memory); }
void operator delete(void* memory, const std::nothrow_t&) noexcept { std::free(memory); }
void operator delete[](void* memory, const std::nothrow_t&) noexcept { std::free(memory); }
void operator delete(void* memory, std::align_val_t) noexcept { std::free(memory); }
void operator delete[](void* memory, std::align_val_t) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t, std::align_val_t) noexcept { std::free(memory); }
void operator delete[](void* memory, std::size_t, std::align_val_t) noexcept { std::free(memory); }
void operator delete(void* memory, std::align_val_t, const std::nothrow_t&) noexcept { std::free(memory); }
void operator delete[](void* memory, std::align_val_t, const std::nothrow_t&) noexcept { std::free(memory); }
