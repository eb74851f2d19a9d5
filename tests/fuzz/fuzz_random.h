// The fuzzers' random choices, shared by the driver's mutations and the
// wire decoder fuzzer's structure-aware ones.
#pragma once

#include <cstddef>
#include <random>

using Rng = std::mt19937_64;

// A number in [0, n), or 0 when n is 0.
inline size_t below(Rng& rng, size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); }
