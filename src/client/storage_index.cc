#include "client/storage_index.h"

#include <fstream>
#include <iterator>

#include "common/json_text.h"
#include "seqflow/error.h"
#include "seqflow/limits.h"
#include "seqflow/value.h"

namespace seqflow {
namespace {

// As JSON text reads it: a non-negative integer is unsigned.
bool is_unsigned(const Value& value) {
  return value.type() == Value::Type::kUint || (value.type() == Value::Type::kInt && value.as_int() >= 0);
}

}  // namespace

std::string storage_index_text(const std::vector<uint64_t>& fingerprints) {
  Value::Array listed(fingerprints.begin(), fingerprints.end());
  return json_text(Value{{"storage_units", fingerprints.size()}, {"fingerprints", Value(std::move(listed))}}) + "\n";
}

std::vector<uint64_t> read_storage_index(const std::string& path, size_t units) {
  std::ifstream file(path);
  if (!file) throw Error(ErrorCode::kNotFound, "no storage checkpoint index at " + path);
  Value index;
  try {
    index = parse_json_text(std::string(std::istreambuf_iterator<char>(file), {}), kMaxDecodeNesting);
  } catch (const Error& error) {
    throw_invalid("storage checkpoint index " + path + " is corrupt: " + error.what());
  }
  const std::string what = "storage checkpoint index " + path;
  const auto fail = [&](std::string_view key, const std::string& problem) {
    throw_invalid(what + " field '" + std::string(key) + "' " + problem);
  };
  if (!index.is_object()) throw_invalid(what + " must be a map, got " + index.type_name());
  for (const auto& [key, value] : index.as_object()) {
    if (key != "storage_units" && key != "fingerprints") throw_invalid(what + " has an unknown field '" + key + "'");
  }
  const Value* saved_units = index.find("storage_units");
  if (saved_units == nullptr) throw_invalid(what + " lacks the field 'storage_units'");
  if (saved_units->type() == Value::Type::kUint) fail("storage_units", "is out of range");
  if (saved_units->type() != Value::Type::kInt) {
    fail("storage_units", std::string("must be an integer, got ") + saved_units->type_name());
  }
  if (saved_units->as_int() != static_cast<int64_t>(units)) {
    throw_invalid("storage checkpoint " + path + " was saved from " + std::to_string(saved_units->as_int()) +
                  " storage units; this cluster has " + std::to_string(units));
  }
  // Indexes saved before fingerprints existed load unchecked.
  std::vector<uint64_t> fingerprints;
  const Value* listed = index.find("fingerprints");
  if (listed == nullptr || listed->is_null()) return fingerprints;
  if (!listed->is_array() || listed->size() != units) {
    fail("fingerprints", "must hold one fingerprint per storage unit");
  }
  for (const Value& fingerprint : listed->as_array()) {
    if (!is_unsigned(fingerprint)) fail("fingerprints", "must hold unsigned integers");
    fingerprints.push_back(fingerprint.as_uint());
  }
  return fingerprints;
}

}  // namespace seqflow
