#include "seqflow/workload.h"

#include <charconv>
#include <string>

#include "common/checked_math.h"
#include "seqflow/error.h"

namespace seqflow {

namespace {

constexpr int64_t kVerlLinear = 24576;

int64_t parse_coefficient(std::string_view text, std::string_view spec) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
    throw_invalid("workload: bad coefficient '" + std::string(text) + "' in '" + std::string(spec) +
                  "'; expected quadratic(a,b) with integers a, b >= 0");
  }
  return value;
}

}  // namespace

Workload Workload::tokens() { return Workload(1, 0, false); }
Workload Workload::verl() { return Workload(kVerlLinear, 1, true); }

Workload Workload::quadratic(int64_t a, int64_t b) {
  if (a < 0 || b < 0) {
    throw_invalid("workload: quadratic(a, b) needs a >= 0 and b >= 0, got a=" + std::to_string(a) +
                  ", b=" + std::to_string(b));
  }
  if (a == 0 && b == 0) throw_invalid("workload: quadratic(0, 0) gives every item zero cost");
  return Workload(a, b, false);
}

Workload Workload::parse(std::string_view spec) {
  if (spec == "tokens") return tokens();
  if (spec == "verl") return verl();
  std::string_view body;
  if (spec.starts_with("quadratic(") && spec.ends_with(")")) {
    body = spec.substr(10, spec.size() - 11);
  } else if (spec.starts_with("quadratic:")) {
    body = spec.substr(10);
  } else {
    throw_invalid("workload: unknown model '" + std::string(spec) + "'; expected tokens, verl or quadratic(a,b)");
  }
  auto comma = body.find(',');
  if (comma == std::string_view::npos) {
    throw_invalid("workload: '" + std::string(spec) + "' needs two coefficients, quadratic(a,b)");
  }
  return quadratic(parse_coefficient(body.substr(0, comma), spec), parse_coefficient(body.substr(comma + 1), spec));
}

std::optional<int64_t> Workload::checked_cost(int64_t length) const {
  auto linear = checked_mul(a_, length);
  if (!linear) return std::nullopt;
  if (b_ == 0) return linear;
  auto square = checked_mul(length, length);
  auto quad = square ? checked_mul(b_, *square) : std::nullopt;
  return quad ? checked_add(*linear, *quad) : std::nullopt;
}

int64_t Workload::cost(int64_t length) const {
  if (length < 0) throw_invalid("workload: length " + std::to_string(length) + " is negative");
  auto total = checked_cost(length);
  if (!total) {
    throw_invalid("workload: cost of length " + std::to_string(length) + " under " + name() + " overflows int64");
  }
  return *total;
}

std::vector<int64_t> Workload::costs(std::span<const int64_t> lengths, std::string_view parameter) const {
  std::vector<int64_t> out(lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) {
    auto where = [&] { return std::string(parameter) + "[" + std::to_string(i) + "] = " + std::to_string(lengths[i]); };
    if (lengths[i] < 0) throw_invalid(where() + " is negative; lengths must be >= 0");
    auto cost = checked_cost(lengths[i]);
    if (!cost) throw_invalid(where() + ": its cost under " + name() + " overflows int64");
    out[i] = *cost;
  }
  return out;
}

int64_t Workload::total(std::span<const int64_t> costs, std::string_view parameter) const {
  int64_t total = 0;
  for (size_t i = 0; i < costs.size(); ++i) {
    auto sum = checked_add(total, costs[i]);
    if (!sum || *sum > kMaxTotalCost) {
      throw_invalid(std::string(parameter) + ": the total workload under " + name() +
                    " overflows the supported range, 2^61 (" + std::to_string(kMaxTotalCost) + ") at " +
                    std::string(parameter) + "[" + std::to_string(i) +
                    "]; split the batch or use a cheaper workload model");
    }
    total = *sum;
  }
  return total;
}

std::string Workload::name() const {
  if (is_tokens()) return "tokens";
  if (verl_) return "verl";
  return "quadratic(" + std::to_string(a_) + "," + std::to_string(b_) + ")";
}

}  // namespace seqflow
