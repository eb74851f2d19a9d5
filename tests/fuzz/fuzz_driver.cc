// A standalone driver for a libFuzzer-style target, for compilers without
// libFuzzer (g++): it mutates the target's seed corpus from a fixed seed for
// a bounded time and runs the target on every mutant. Without coverage
// feedback it keeps the seeds as the pool and stacks several mutations per
// run: in half the runs only the target's structure-aware one, which keeps
// the MessagePack valid so that mutants reach the decoders' checks; in the
// other half byte-level ones too (bit flips, inserts, deletes, splices,
// length fields), which also break it. A finding (a crash, a sanitizer
// report, an exception the target lets out) ends the run with the input
// saved for replay.
//
//   seqflow_wire_fuzz --seconds 20 --seed 1     fuzz, print the execution count
//   seqflow_wire_fuzz FILE...                   replay saved inputs
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "fuzz_random.h"
#include "fuzz_target.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#include <sanitizer/common_interface_defs.h>
#define SEQFLOW_HAS_SANITIZER 1
#endif

namespace {

using Input = std::vector<uint8_t>;

constexpr size_t kMaxInputBytes = 64 * 1024;
constexpr size_t kMaxStackedMutations = 8;
constexpr const char* kCrashFile = "fuzz_crash.bin";

// The input being run, for the crash handlers (which may only make
// async-signal-safe calls, hence no std::string or iostream there).
const Input* g_current = nullptr;

void save_current_input() {
  if (g_current == nullptr) return;
  const int fd = ::creat(kCrashFile, 0644);
  if (fd < 0) return;
  size_t written = 0;
  while (written < g_current->size()) {
    const ssize_t n = ::write(fd, g_current->data() + written, g_current->size() - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  ::close(fd);
  static const char kNote[] = "\nfuzz finding: the input is saved in fuzz_crash.bin\n";
  [[maybe_unused]] const ssize_t ignored = ::write(STDERR_FILENO, kNote, sizeof kNote - 1);
}

void on_fatal_signal(int signal) {
  save_current_input();
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

void install_crash_handlers() {
  for (int signal : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) ::signal(signal, on_fatal_signal);
#ifdef SEQFLOW_HAS_SANITIZER
  __sanitizer_set_death_callback(save_current_input);  // sanitizer reports end in _exit, not a signal
#endif
}

// Runs the target; an exception it lets out is a finding.
bool run_one(const Input& input) {
  g_current = &input;
  try {
    LLVMFuzzerTestOneInput(input.data(), input.size());
  } catch (const std::exception& error) {
    save_current_input();
    std::fprintf(stderr, "fuzz finding: the target let out an exception: %s\n", error.what());
    return false;
  } catch (...) {
    save_current_input();
    std::fprintf(stderr, "fuzz finding: the target let out a non-standard exception\n");
    return false;
  }
  g_current = nullptr;
  return true;
}

// MessagePack type bytes and values at the edges of what decoders check.
constexpr uint8_t kInterestingBytes[] = {0x00, 0x01, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xc3,
                                         0xc4, 0xc5, 0xc6, 0xcf, 0xd3, 0xd9, 0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff};

uint64_t boundary_value(Rng& rng, uint64_t old, unsigned bits) {
  const uint64_t max = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  const uint64_t choices[] = {0, 1, old + 1, old - 1, old * 2, old / 2, max, max / 2 + 1, rng()};
  return choices[below(rng, std::size(choices))] & max;
}

// Rewrites a length: the one after a MessagePack marker that carries one
// (fixmap/fixarray/fixstr in the marker's low bits; bin/str/array/map
// 8/16/32 big-endian), or else a 4-byte little-endian frame length.
void tweak_length(Input& input, Rng& rng) {
  if (input.empty()) return;
  const size_t at = below(rng, input.size());
  const uint8_t marker = input[at];
  auto set_big_endian = [&](size_t bytes) {
    if (at + bytes >= input.size()) return;
    uint64_t old = 0;
    for (size_t b = 0; b < bytes; ++b) old = (old << 8) | input[at + 1 + b];
    const uint64_t value = boundary_value(rng, old, static_cast<unsigned>(8 * bytes));
    for (size_t b = 0; b < bytes; ++b) input[at + bytes - b] = static_cast<uint8_t>(value >> (8 * b));
  };
  if ((marker & 0xe0) == 0x80 || (marker & 0xe0) == 0xa0) {  // fixmap, fixarray, fixstr
    const uint8_t mask = (marker & 0xe0) == 0xa0 ? 0x1f : 0x0f;
    input[at] = static_cast<uint8_t>((marker & ~mask) | (boundary_value(rng, marker & mask, 5) & mask));
  } else if (marker == 0xc4 || marker == 0xd9) {
    set_big_endian(1);
  } else if (marker == 0xc5 || marker == 0xda || marker == 0xdc || marker == 0xde) {
    set_big_endian(2);
  } else if (marker == 0xc6 || marker == 0xdb || marker == 0xdd || marker == 0xdf) {
    set_big_endian(4);
  } else if (at + 4 <= input.size()) {
    uint64_t old = 0;
    for (size_t b = 0; b < 4; ++b) old |= static_cast<uint64_t>(input[at + b]) << (8 * b);
    const uint64_t value = boundary_value(rng, old, 32);
    for (size_t b = 0; b < 4; ++b) input[at + b] = static_cast<uint8_t>(value >> (8 * b));
  }
}

// The target's own, structure-aware mutation.
void mutate_structure(Input& input, Rng& rng) {
  const size_t size = std::min(input.size(), kMaxInputBytes);
  input.resize(kMaxInputBytes);
  input.resize(LLVMFuzzerCustomMutator(input.data(), size, kMaxInputBytes, static_cast<unsigned>(rng())));
}

void mutate(Input& input, const std::vector<Input>& pool, Rng& rng) {
  switch (below(rng, 8)) {
    case 0:  // bit flip
      if (!input.empty()) input[below(rng, input.size())] ^= static_cast<uint8_t>(1u << below(rng, 8));
      break;
    case 1:  // interesting byte
      if (!input.empty()) input[below(rng, input.size())] = kInterestingBytes[below(rng, std::size(kInterestingBytes))];
      break;
    case 2: {  // insert random bytes
      const size_t at = below(rng, input.size() + 1);
      const size_t count = 1 + below(rng, 8);
      for (size_t i = 0; i < count; ++i)
        input.insert(input.begin() + static_cast<std::ptrdiff_t>(at), static_cast<uint8_t>(rng()));
      break;
    }
    case 3: {  // delete a range
      if (input.empty()) break;
      const size_t at = below(rng, input.size());
      const size_t count = 1 + below(rng, std::min<size_t>(16, input.size() - at));
      input.erase(input.begin() + static_cast<std::ptrdiff_t>(at),
                  input.begin() + static_cast<std::ptrdiff_t>(at + count));
      break;
    }
    case 4: {  // splice: this input's head, another's tail
      const Input& other = pool[below(rng, pool.size())];
      const size_t head = below(rng, input.size() + 1);
      const size_t tail = below(rng, other.size() + 1);
      input.resize(head);
      input.insert(input.end(), other.begin() + static_cast<std::ptrdiff_t>(tail), other.end());
      break;
    }
    case 5:  // duplicate a range in place
      if (!input.empty()) {
        const size_t at = below(rng, input.size());
        const size_t count = 1 + below(rng, std::min<size_t>(32, input.size() - at));
        const Input copy(input.begin() + static_cast<std::ptrdiff_t>(at),
                         input.begin() + static_cast<std::ptrdiff_t>(at + count));
        input.insert(input.begin() + static_cast<std::ptrdiff_t>(below(rng, input.size() + 1)), copy.begin(),
                     copy.end());
      }
      break;
    case 6:
      tweak_length(input, rng);
      break;
    default:
      mutate_structure(input, rng);
      break;
  }
  if (input.size() > kMaxInputBytes) input.resize(kMaxInputBytes);
}

int replay(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::ifstream file(argv[i], std::ios::binary);
    if (!file) {
      std::fprintf(stderr, "cannot read %s\n", argv[i]);
      return 2;
    }
    const Input input((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    std::printf("replaying %s (%zu bytes)\n", argv[i], input.size());
    if (!run_one(input)) return 1;
  }
  std::printf("no finding\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 10;
  uint64_t seed = 1;
  int argi = 1;
  for (; argi < argc; ++argi) {
    const std::string arg = argv[argi];
    if ((arg == "--seconds" || arg == "--seed") && argi + 1 < argc) {
      char* end = nullptr;
      const char* value = argv[++argi];
      if (arg == "--seconds") {
        seconds = std::strtod(value, &end);
      } else {
        seed = std::strtoull(value, &end, 10);
      }
      if (end == value || *end != '\0' || seconds < 0) {
        std::fprintf(stderr, "%s needs a non-negative number, got '%s'\n", arg.c_str(), value);
        return 2;
      }
    } else if (arg.rfind("--", 0) == 0) {
      std::fprintf(stderr, "usage: %s [--seconds N] [--seed S] | FILE...\n", argv[0]);
      return 2;
    } else {
      break;
    }
  }
  install_crash_handlers();
  if (argi < argc) return replay(argc, argv, argi);

  const std::vector<Input> pool = fuzz_seed_corpus();
  for (const Input& seed_input : pool) {
    if (!run_one(seed_input)) return 1;
  }
  Rng rng(seed);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  uint64_t executions = pool.size();
  while (std::chrono::steady_clock::now() < deadline) {
    for (int batch = 0; batch < 64; ++batch) {  // check the clock every 64 runs
      Input input = pool[below(rng, pool.size())];
      // Half the runs keep the MessagePack valid, half also break it.
      const bool structured_only = below(rng, 2) == 0;
      const size_t mutations = 1 + below(rng, kMaxStackedMutations);
      for (size_t m = 0; m < mutations; ++m) {
        if (structured_only) {
          mutate_structure(input, rng);
        } else {
          mutate(input, pool, rng);
        }
      }
      if (!run_one(input)) {
        std::fprintf(stderr, "seed %llu, execution %llu\n", static_cast<unsigned long long>(seed),
                     static_cast<unsigned long long>(executions));
        return 1;
      }
      ++executions;
    }
  }
  std::printf("wire decoder fuzz: %llu executions in %.0f s from %zu seeds (seed %llu), no finding\n",
              static_cast<unsigned long long>(executions), seconds, pool.size(), static_cast<unsigned long long>(seed));
  return 0;
}
