// Room for `size` elements, grown the way push_back grows a vector: to at
// least twice its capacity. An insert of a few samples at a time then costs
// amortized O(1) per sample; an exact reserve would copy the whole vector on
// every insert (a put of 16 samples into a partition of 100k took 5 ms).
#pragma once

#include <algorithm>
#include <cstddef>
#include <new>

namespace seqflow {

// Near the memory limit, where doubling does not fit, exactly `size` still
// may: a failed reserve leaves the vector as it was.
template <class Vector>
void amortized_reserve(Vector& vector, size_t size) {
  if (size <= vector.capacity()) return;
  try {
    vector.reserve(std::max(size, 2 * vector.capacity()));
  } catch (const std::bad_alloc&) {
    vector.reserve(size);
  }
}

}  // namespace seqflow
