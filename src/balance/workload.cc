#include "seqflow/workload.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "balance/number_text.h"
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

Workload Workload::tokens() { return Workload(Kind::kTokens, 1, 0); }
Workload Workload::verl() { return Workload(Kind::kVerl, kVerlLinear, 1); }
Workload Workload::online() { return Workload(Kind::kOnline, 1, 0); }

Workload Workload::quadratic(int64_t a, int64_t b) {
  if (a < 0 || b < 0) {
    throw_invalid("workload: quadratic(a, b) needs a >= 0 and b >= 0, got a=" + std::to_string(a) +
                  ", b=" + std::to_string(b));
  }
  if (a == 0 && b == 0) throw_invalid("workload: quadratic(0, 0) gives every item zero cost");
  if (a == 1 && b == 0) return tokens();
  return Workload(Kind::kQuadratic, a, b);
}

Workload Workload::calibrated(const SecondsCoefficients& coefficients, const FitReport& fit) {
  const std::pair<const char*, double> named[] = {
      {"per_token", coefficients.per_token},
      {"per_token_squared", coefficients.per_token_squared},
      {"per_sequence", coefficients.per_sequence},
      {"per_micro_batch", coefficients.per_micro_batch},
      {"per_unaligned_token_squared", coefficients.per_unaligned_token_squared}};
  for (const auto& [name, value] : named) {
    if (!std::isfinite(value) || value < 0) {
      throw_invalid(std::string("workload: calibrated ") + name + " = " + calibration::number_text(value) +
                    " must be a finite number of seconds >= 0");
    }
  }
  if (coefficients.alignment < 1) {
    throw_invalid("workload: calibrated alignment = " + std::to_string(coefficients.alignment) +
                  " must be >= 1 (1: no length is unaligned)");
  }
  if (coefficients.alignment == 1 && coefficients.per_unaligned_token_squared != 0) {
    throw_invalid("workload: calibrated per_unaligned_token_squared = " +
                  calibration::number_text(coefficients.per_unaligned_token_squared) +
                  " needs an alignment > 1; with alignment = 1 no length is unaligned");
  }
  if (coefficients.per_token == 0 && coefficients.per_token_squared == 0 && coefficients.per_sequence == 0) {
    throw_invalid(
        "workload: a calibrated model with per_token, per_token_squared and per_sequence all 0 gives every "
        "sequence zero cost");
  }
  Workload out(Kind::kCalibrated, 0, 0);
  out.seconds_ = coefficients;
  out.fit_ = fit;
  return out;
}

Workload Workload::parse(std::string_view spec) {
  if (spec == "tokens") return tokens();
  if (spec == "verl") return verl();
  if (spec == "online") return online();
  std::string_view body;
  if (spec.starts_with("quadratic(") && spec.ends_with(")")) {
    body = spec.substr(10, spec.size() - 11);
  } else if (spec.starts_with("quadratic:")) {
    body = spec.substr(10);
  } else {
    throw_invalid("workload: unknown model '" + std::string(spec) +
                  "'; expected tokens, verl, quadratic(a,b) or online");
  }
  auto comma = body.find(',');
  if (comma == std::string_view::npos) {
    throw_invalid("workload: '" + std::string(spec) + "' needs two coefficients, quadratic(a,b)");
  }
  return quadratic(parse_coefficient(body.substr(0, comma), spec), parse_coefficient(body.substr(comma + 1), spec));
}

double Workload::sequence_seconds(int64_t length) const {
  const auto l = static_cast<double>(length);
  const double squared =
      seconds_.per_token_squared + (length % seconds_.alignment != 0 ? seconds_.per_unaligned_token_squared : 0.0);
  return seconds_.per_token * l + squared * l * l + seconds_.per_sequence;
}

std::optional<int64_t> Workload::checked_cost(int64_t length) const {
  if (kind_ == Kind::kCalibrated) {
    const double units = std::round(sequence_seconds(length) * kCostUnitsPerSecond);
    // 2^63 is exact in a double; anything at or above it is beyond int64.
    if (!(units < 0x1p63)) return std::nullopt;
    return static_cast<int64_t>(units);
  }
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

double Workload::seconds(std::span<const int64_t> lengths) const {
  if (kind_ != Kind::kCalibrated) {
    throw_invalid("workload: " + name() +
                  " has no seconds; only a calibrated workload (seqflow::calibrate) predicts a micro-batch's time");
  }
  double total = seconds_.per_micro_batch;
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0) {
      throw_invalid("lengths[" + std::to_string(i) + "] = " + std::to_string(lengths[i]) +
                    " is negative; lengths must be >= 0");
    }
    total += sequence_seconds(lengths[i]);
  }
  return total;
}

std::string Workload::name() const {
  switch (kind_) {
    case Kind::kTokens:
      return "tokens";
    case Kind::kVerl:
      return "verl";
    case Kind::kOnline:
      return "online";
    case Kind::kQuadratic:
      return "quadratic(" + std::to_string(a_) + "," + std::to_string(b_) + ")";
    case Kind::kCalibrated:
      break;
  }
  char text[256];
  int written =
      std::snprintf(text, sizeof text,
                    "calibrated(per_token=%.4g, per_token_squared=%.4g, per_sequence=%.4g, "
                    "per_micro_batch=%.4g",
                    seconds_.per_token, seconds_.per_token_squared, seconds_.per_sequence, seconds_.per_micro_batch);
  if (seconds_.alignment > 1) {
    written += std::snprintf(text + written, sizeof text - static_cast<size_t>(written),
                             ", per_unaligned_token_squared=%.4g, alignment=%lld", seconds_.per_unaligned_token_squared,
                             static_cast<long long>(seconds_.alignment));
  }
  return std::string(text, static_cast<size_t>(written)) + ")";
}

bool Workload::operator==(const Workload& other) const {
  return kind_ == other.kind_ && a_ == other.a_ && b_ == other.b_ && seconds_ == other.seconds_;
}

}  // namespace seqflow
