// Workload models: the cost of one sequence of length L, used as the weight
// that balancing evens out. Token balance is not compute balance once
// attention's L*L term matters.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace seqflow {

class Workload {
 public:
  // cost = L
  static Workload tokens();
  // verl's model of a 4096-hidden transformer: 24576 * L + L * L
  static Workload verl();
  // cost = a * L + b * L * L, with a, b >= 0
  static Workload quadratic(int64_t a, int64_t b);
  // "tokens", "verl", "quadratic(a,b)" or "quadratic:a,b".
  static Workload parse(std::string_view spec);

  // Cost of one length; throws on a negative length or on int64 overflow.
  int64_t cost(int64_t length) const;
  // Costs of many lengths; names the parameter and index on error.
  std::vector<int64_t> costs(std::span<const int64_t> lengths, std::string_view parameter = "weights") const;
  // The sum of costs() of some items; throws, naming the parameter, when it
  // exceeds kMaxTotalCost.
  int64_t total(std::span<const int64_t> costs, std::string_view parameter = "weights") const;
  // The largest total workload: balancing compares doubled sums, so totals
  // keep that headroom below int64's range.
  static constexpr int64_t kMaxTotalCost = INT64_MAX / 4;

  bool is_tokens() const { return a_ == 1 && b_ == 0; }
  int64_t linear() const { return a_; }
  int64_t quadratic_term() const { return b_; }
  std::string name() const;

 private:
  Workload(int64_t a, int64_t b, bool verl) : a_(a), b_(b), verl_(verl) {}
  std::optional<int64_t> checked_cost(int64_t length) const;
  int64_t a_;
  int64_t b_;
  bool verl_;
};

}  // namespace seqflow
