// Room for `size` elements, grown the way push_back grows a vector: to at
// least twice its capacity. An insert of a few samples at a time then costs
// amortized O(1) per sample; an exact reserve would copy the whole vector on
// every insert (a put of 16 samples into a partition of 100k took 5 ms).
#pragma once

#include <algorithm>
#include <cstddef>

namespace seqflow {

template <class Vector>
void amortized_reserve(Vector& vector, size_t size) {
  if (size > vector.capacity()) vector.reserve(std::max(size, 2 * vector.capacity()));
}

}  // namespace seqflow
