#include "core/name_rule.h"

#include <cstdint>
#include <cstdio>
#include <optional>

#include "seqflow/error.h"

namespace seqflow::core {
namespace {

// Bytes of the valid UTF-8 sequence at `at`, or 0. Refuses overlong forms,
// encoded surrogates (U+D800..U+DFFF) and code points beyond U+10FFFF.
size_t utf8_sequence(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(at);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint8_t low = 0x80, high = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // beyond U+10FFFF
  } else {
    return 0;
  }
  if (at + length > text.size() || byte(at + 1) < low || byte(at + 1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if ((byte(at + i) & 0xC0) != 0x80) return 0;
  }
  return length;
}

bool is_utf8(std::string_view text) {
  for (size_t at = 0; at < text.size();) {
    const size_t length = utf8_sequence(text, at);
    if (length == 0) return false;
    at += length;
  }
  return true;
}

// 'name' as a message shows it: control bytes, bytes of invalid UTF-8, quotes
// and backslashes escaped; at most 80 bytes of it.
std::string quoted(std::string_view name) {
  constexpr size_t kShown = 80;
  std::string out = "'";
  for (size_t i = 0; i < name.size() && i < kShown; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F || c >= 0x80) {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += "'";
  if (name.size() > kShown) out += "... (" + std::to_string(name.size()) + " bytes)";
  return out;
}

// What breaks the rule in `name`, or nullopt.
std::optional<std::string> name_problem(std::string_view name) {
  if (name.empty()) return "must not be empty";
  if (name.find('\0') != std::string_view::npos) return "must not contain NUL ('\\x00')";
  if (!is_utf8(name)) return "must be valid UTF-8";
  if (name.size() > kMaxNameBytes) {
    return "must be at most " + std::to_string(kMaxNameBytes) + " bytes of UTF-8, has " + std::to_string(name.size());
  }
  return std::nullopt;
}

}  // namespace

void check_name(std::string_view name, const std::string& parameter) {
  if (auto problem = name_problem(name)) throw_invalid(parameter + " " + *problem + ", got " + quoted(name));
}

}  // namespace seqflow::core
