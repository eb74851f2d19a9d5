// The balancing engine: split weighted items into k parts of near-equal load.
//
// Pure functions over arrays: no locks, no I/O. Samplers, the pack planner,
// the CLI and the Python API all call these.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqflow/workload.h"

namespace seqflow::balance {

// How many items (or groups) each part may hold.
enum class Cardinality {
  kFree,      // any count, including zero
  kEqual,     // every part the same count; needs count % k == 0
  kBalanced,  // counts differ by at most one
};

enum class Algorithm {
  kAuto,  // run the suitable algorithms, refine, keep the best
  kKK,    // k-way largest differencing (Karmarkar-Karp)
  kLPT,   // largest first onto the lightest part with room
};

Cardinality parse_cardinality(std::string_view name);
Algorithm parse_algorithm(std::string_view name);
std::string_view to_string(Cardinality cardinality);
std::string_view to_string(Algorithm algorithm);

struct Options {
  Cardinality cardinality = Cardinality::kFree;
  Workload workload = Workload::tokens();
  Algorithm algorithm = Algorithm::kAuto;
  // One group id per item; items of a group stay in one part and count as one
  // for cardinality. Empty means every item is its own group.
  std::span<const int64_t> groups = {};
};

struct Partition {
  std::vector<std::vector<int64_t>> parts;  // item indexes, each sorted ascending
  std::vector<int64_t> sums;                // workload per part
  std::vector<int64_t> assignment;          // item -> part
  int64_t lower_bound = 0;                  // no plan's heaviest part is lighter
  double spread = 0.0;                      // (max - min) / mean
  double max_over_mean = 0.0;
  double gap = 0.0;  // heaviest / lower_bound - 1

  int64_t heaviest() const;
};

// Splits items with the given non-negative integer weights (lengths, before
// the workload model is applied) into k parts. Deterministic: ties are broken
// by item index. Throws seqflow::Error (kInvalidArgument) on bad input.
Partition partition(std::span<const int64_t> weights, int64_t k, const Options& options = {});

// Exact equivalents of verl / TransferQueue's functions of the same names
// (same parts, same order), for users who need bit-identical plans. Where
// those fail an assertion these throw seqflow::Error instead. k_partitions
// beyond the item count gives empty parts, as in verl, but at most 2^20 parts.
std::vector<std::vector<int64_t>> karmarkar_karp(std::span<const int64_t> seqlens, int64_t k_partitions,
                                                 bool equal_size);
std::vector<std::vector<int64_t>> get_seqlen_balanced_partitions(std::span<const int64_t> seqlens, int64_t k_partitions,
                                                                 bool equal_size);
// verl's greedy_partition: items in the given order, each onto the part with
// the smallest sum so far (the lowest such part on ties). equal_size adds
// sum + 1 to every item, so that counts even out first, and needs the item
// count to be a multiple of k_partitions. An empty seqlen_list gives k empty parts.
std::vector<std::vector<int64_t>> greedy_partition(std::span<const int64_t> seqlens, int64_t k_partitions,
                                                   bool equal_size);
// verl's get_group_balanced_partitions: k parts of item indexes (each
// sorted), the items of one uid always in one part, the same number of uids
// in every part, balanced by verl's workload (24576 * L + L * L) summed per
// uid. uids are numbered by first appearance, so that the parts are verl's
// when every uid's items are adjacent (verl's assumption); a uid whose items
// are not adjacent stays whole (verl would split it).
std::vector<std::vector<int64_t>> get_group_balanced_partitions(std::span<const int64_t> seqlens,
                                                                std::span<const int64_t> uids, int64_t k_partitions);

}  // namespace seqflow::balance
