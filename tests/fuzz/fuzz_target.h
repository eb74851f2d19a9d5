// What a fuzz target gives the standalone driver: libFuzzer's entry points
// (so the same target also builds under clang -fsanitize=fuzzer) and its
// seed inputs, which libFuzzer would read from a directory instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// A structure-aware mutation of data[0, size) in place (data holds max_size
// bytes); returns the new size, or `size` unchanged when it cannot mutate.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed);

// Valid inputs, made with the real encoders, for the driver to mutate.
std::vector<std::vector<uint8_t>> fuzz_seed_corpus();
