// Workload::to_json / from_json: every kind as one JSON object with a
// "format" version, so a calibrated model can be saved and loaded.
//
//   {"format": 1, "kind": "tokens"} / {"format": 1, "kind": "verl"} / {"format": 1, "kind": "online"}
//   {"format": 1, "kind": "quadratic", "a": 3, "b": 2}
//   {"format": 1, "kind": "calibrated", "per_token": ..., "per_token_squared": ...,
//    "per_sequence": ..., "per_micro_batch": ..., "fit": {"records": ..., "outliers": ...,
//    "median_error": ..., "p90_error": ..., "max_error": ...}}
//   A calibrated model with an alignment > 1 adds "per_unaligned_token_squared"
//   and "alignment"; without them a model has alignment 1 (files written
//   before the term existed load unchanged).
#include <set>
#include <string>

#include "common/json_text.h"
#include "seqflow/error.h"
#include "seqflow/limits.h"
#include "seqflow/workload.h"

namespace seqflow {

namespace {

constexpr int64_t kWorkloadFormat = 1;

// Throws naming the first key of `object` outside `known`.
void check_keys(const Value& object, const std::set<std::string>& known, const std::string& where) {
  for (const auto& [key, value] : object.as_object()) {
    if (!known.contains(key)) throw_invalid("workload JSON: unknown key '" + key + "' in " + where);
  }
}

const Value& member(const Value& object, const std::string& key, const std::string& where) {
  const Value* value = object.find(key);
  if (value == nullptr) throw_invalid("workload JSON: " + where + " lacks the key '" + key + "'");
  return *value;
}

int64_t integer_member(const Value& object, const std::string& key, const std::string& where) {
  const Value& value = member(object, key, where);
  if (value.type() != Value::Type::kInt) {
    throw_invalid("workload JSON: " + where + " '" + key + "' = " + value.dump() + " is not an integer");
  }
  return value.as_int();
}

double number_member(const Value& object, const std::string& key, const std::string& where) {
  const Value& value = member(object, key, where);
  if (!value.is_number()) {
    throw_invalid("workload JSON: " + where + " '" + key + "' = " + value.dump() + " is not a number");
  }
  return value.as_double();
}

FitReport fit_from_json(const Value& fit) {
  const std::string where = "the calibrated model's 'fit'";
  if (!fit.is_object()) throw_invalid("workload JSON: 'fit' = " + fit.dump() + " is not an object");
  check_keys(fit, {"records", "outliers", "median_error", "p90_error", "max_error"}, where);
  FitReport out;
  out.records = integer_member(fit, "records", where);
  out.outliers = integer_member(fit, "outliers", where);
  out.median_error = number_member(fit, "median_error", where);
  out.p90_error = number_member(fit, "p90_error", where);
  out.max_error = number_member(fit, "max_error", where);
  if (out.records < 0 || out.outliers < 0 || out.outliers > out.records) {
    throw_invalid("workload JSON: 'fit' has records = " + std::to_string(out.records) +
                  " and outliers = " + std::to_string(out.outliers) + "; expected 0 <= outliers <= records");
  }
  return out;
}

}  // namespace

std::string Workload::to_json() const {
  Value out{{"format", kWorkloadFormat}};
  switch (kind_) {
    case Kind::kTokens:
      out["kind"] = "tokens";
      break;
    case Kind::kVerl:
      out["kind"] = "verl";
      break;
    case Kind::kOnline:
      out["kind"] = "online";
      break;
    case Kind::kQuadratic:
      out["kind"] = "quadratic";
      out["a"] = a_;
      out["b"] = b_;
      break;
    case Kind::kCalibrated:
      out["kind"] = "calibrated";
      out["per_token"] = seconds_.per_token;
      out["per_token_squared"] = seconds_.per_token_squared;
      out["per_sequence"] = seconds_.per_sequence;
      out["per_micro_batch"] = seconds_.per_micro_batch;
      if (seconds_.alignment > 1) {
        out["per_unaligned_token_squared"] = seconds_.per_unaligned_token_squared;
        out["alignment"] = seconds_.alignment;
      }
      out["fit"] = {{"records", fit_.records},
                    {"outliers", fit_.outliers},
                    {"median_error", fit_.median_error},
                    {"p90_error", fit_.p90_error},
                    {"max_error", fit_.max_error}};
      break;
  }
  return json_text(out);
}

Workload Workload::from_json(std::string_view text) {
  Value object;
  try {
    object = parse_json_text(text, kMaxDecodeNesting);
  } catch (const Error& error) {
    throw_invalid(std::string("workload JSON: the text ") + error.what());
  }
  if (!object.is_object()) throw_invalid("workload JSON: expected an object, got " + object.dump());
  const int64_t format = integer_member(object, "format", "the model");
  if (format != kWorkloadFormat) {
    throw_invalid("workload JSON: 'format' = " + std::to_string(format) + " is not supported; this version reads " +
                  std::to_string(kWorkloadFormat));
  }
  const Value& kind = member(object, "kind", "the model");
  const std::string name = kind.is_string() ? kind.as_string() : "";
  if (name == "tokens" || name == "verl" || name == "online") {
    check_keys(object, {"format", "kind"}, "a " + name + " model");
    return parse(name);
  }
  if (name == "quadratic") {
    check_keys(object, {"format", "kind", "a", "b"}, "a quadratic model");
    return quadratic(integer_member(object, "a", "the quadratic model"),
                     integer_member(object, "b", "the quadratic model"));
  }
  if (name == "calibrated") {
    const std::string where = "the calibrated model";
    check_keys(object,
               {"format", "kind", "per_token", "per_token_squared", "per_sequence", "per_micro_batch",
                "per_unaligned_token_squared", "alignment", "fit"},
               "a calibrated model");
    SecondsCoefficients coefficients;
    coefficients.per_token = number_member(object, "per_token", where);
    coefficients.per_token_squared = number_member(object, "per_token_squared", where);
    coefficients.per_sequence = number_member(object, "per_sequence", where);
    coefficients.per_micro_batch = number_member(object, "per_micro_batch", where);
    if (object.contains("alignment") || object.contains("per_unaligned_token_squared")) {
      coefficients.per_unaligned_token_squared = number_member(object, "per_unaligned_token_squared", where);
      coefficients.alignment = integer_member(object, "alignment", where);
    }
    const Value* fit = object.find("fit");
    return calibrated(coefficients, fit == nullptr ? FitReport{} : fit_from_json(*fit));
  }
  throw_invalid("workload JSON: 'kind' = " + kind.dump() +
                " is not one of tokens, verl, quadratic, calibrated, online");
}

}  // namespace seqflow
