#include "common/json_text.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "seqflow/error.h"

namespace seqflow {
namespace {

void append_string(std::string& out, std::string_view text) {
  out.push_back('"');
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[7];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
          out += escaped;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

// The shortest digits that read back as `number`, laid out as earlier builds
// wrote them: plain decimals while the point lies within 15 digits of the
// first (ending ".0" when whole), else d.ddde+XX.
void append_double(std::string& out, double number) {
  if (!std::isfinite(number)) {
    out += "null";
    return;
  }
  if (number == 0) {
    out += std::signbit(number) ? "-0.0" : "0.0";
    return;
  }
  char scientific[32];
  const auto written = std::to_chars(scientific, scientific + sizeof scientific, number, std::chars_format::scientific);
  const std::string_view text(scientific, static_cast<size_t>(written.ptr - scientific));
  const size_t e = text.find('e');
  std::string digits;
  for (const char c : text.substr(0, e)) {
    if (c == '-') out.push_back('-');
    if (c >= '0' && c <= '9') digits.push_back(c);
  }
  int exponent = 0;
  std::from_chars(text.data() + e + (text[e + 1] == '+' ? 2 : 1), text.data() + text.size(), exponent);
  const int count = static_cast<int>(digits.size());
  const int point = exponent + 1;  // digits before the decimal point
  constexpr int kMinPoint = -4, kMaxPoint = 15;
  if (count <= point && point <= kMaxPoint) {
    out += digits;
    out.append(static_cast<size_t>(point - count), '0');
    out += ".0";
  } else if (0 < point && point <= kMaxPoint) {
    out += digits.substr(0, static_cast<size_t>(point));
    out.push_back('.');
    out += digits.substr(static_cast<size_t>(point));
  } else if (kMinPoint < point && point <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-point), '0');
    out += digits;
  } else {
    out.push_back(digits[0]);
    if (count > 1) {
      out.push_back('.');
      out += digits.substr(1);
    }
    const int power = point - 1;
    const std::string power_digits = std::to_string(std::abs(power));
    out += power < 0 ? "e-" : "e+";
    if (power_digits.size() < 2) out.push_back('0');
    out += power_digits;
  }
}

void append_json(std::string& out, const Value& value, int indent, int level) {
  const auto new_line = [&](int at) {
    if (indent < 0) return;
    out.push_back('\n');
    out.append(static_cast<size_t>(indent * at), ' ');
  };
  switch (value.type()) {
    case Value::Type::kNull:
      out += "null";
      return;
    case Value::Type::kBool:
      out += value.as_bool() ? "true" : "false";
      return;
    case Value::Type::kInt:
      out += std::to_string(value.as_int());
      return;
    case Value::Type::kUint:
      out += std::to_string(value.as_uint());
      return;
    case Value::Type::kDouble:
      append_double(out, value.as_double());
      return;
    case Value::Type::kString:
      append_string(out, value.as_string());
      return;
    case Value::Type::kArray: {
      out.push_back('[');
      const char* separator = "";
      for (const Value& item : value.as_array()) {
        out += separator;
        new_line(level + 1);
        append_json(out, item, indent, level + 1);
        separator = ",";
      }
      if (!value.empty()) new_line(level);
      out.push_back(']');
      return;
    }
    case Value::Type::kObject: {
      out.push_back('{');
      const char* separator = "";
      for (const auto& [key, item] : value.as_object()) {
        out += separator;
        new_line(level + 1);
        append_string(out, key);
        out += indent < 0 ? ":" : ": ";
        append_json(out, item, indent, level + 1);
        separator = ",";
      }
      if (!value.empty()) new_line(level);
      out.push_back('}');
      return;
    }
  }
}

// A recursive-descent reader of RFC 8259 JSON text.
class JsonTextReader {
 public:
  JsonTextReader(std::string_view text, size_t max_depth) : text_(text), max_depth_(max_depth) {}

  Value document() {
    Value out = value(0);
    skip_space();
    if (at_ != text_.size()) fail("text follows the value");
    return out;
  }

 private:
  [[noreturn]] void fail(std::string_view problem) const {
    throw_invalid("is not valid JSON: " + std::string(problem) + " at byte " + std::to_string(at_));
  }

  void skip_space() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r')) {
      ++at_;
    }
  }

  char peek() {
    skip_space();
    if (at_ == text_.size()) fail("the text ends inside a value");
    return text_[at_];
  }

  void expect(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) fail("unexpected character");
    at_ += word.size();
  }

  Value value(size_t depth) {
    switch (peek()) {
      case '{':
        return object(depth);
      case '[':
        return array(depth);
      case '"':
        return string();
      case 'n':
        expect("null");
        return Value();
      case 't':
        expect("true");
        return true;
      case 'f':
        expect("false");
        return false;
      default:
        return number();
    }
  }

  void enter(size_t depth) {
    if (depth >= max_depth_) fail("containers nest deeper than " + std::to_string(max_depth_));
    ++at_;
  }

  Value array(size_t depth) {
    enter(depth);
    Value out = Value::array();
    if (peek() == ']') {
      ++at_;
      return out;
    }
    while (true) {
      out.push_back(value(depth + 1));
      const char next = peek();
      ++at_;
      if (next == ']') return out;
      if (next != ',') fail("an array's elements must be separated by ','");
    }
  }

  Value object(size_t depth) {
    enter(depth);
    Value out = Value::object();
    if (peek() == '}') {
      ++at_;
      return out;
    }
    while (true) {
      if (peek() != '"') fail("an object's key must be a string");
      std::string key = string();
      if (peek() != ':') fail("a key must be followed by ':'");
      ++at_;
      out.as_object().insert_or_assign(std::move(key), value(depth + 1));
      const char next = peek();
      ++at_;
      if (next == '}') return out;
      if (next != ',') fail("an object's members must be separated by ','");
    }
  }

  uint32_t hex4() {
    if (text_.size() - at_ < 4) fail("a \\u escape needs 4 hex digits");
    uint32_t out = 0;
    const auto [end, error] = std::from_chars(text_.data() + at_, text_.data() + at_ + 4, out, 16);
    if (error != std::errc() || end != text_.data() + at_ + 4) fail("a \\u escape needs 4 hex digits");
    at_ += 4;
    return out;
  }

  static void append_utf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out.push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (code >> 6)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
    } else if (code < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (code >> 12)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xf0 | (code >> 18)));
      out.push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
    }
  }

  // A \u escape, with the second half of a surrogate pair when it is one.
  uint32_t code_point() {
    const uint32_t first = hex4();
    if (first < 0xd800 || first > 0xdfff) return first;
    if (first > 0xdbff || text_.substr(at_, 2) != "\\u") fail("a \\u escape holds half a surrogate pair");
    at_ += 2;
    const uint32_t second = hex4();
    if (second < 0xdc00 || second > 0xdfff) fail("a \\u escape holds half a surrogate pair");
    return 0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00);
  }

  std::string string() {
    ++at_;  // the opening quote
    std::string out;
    while (true) {
      if (at_ == text_.size()) fail("the text ends inside a string");
      const char c = text_[at_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("a string holds an unescaped control character");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (at_ == text_.size()) fail("the text ends inside a string");
      switch (text_[at_++]) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u':
          append_utf8(out, code_point());
          break;
        default:
          --at_;
          fail("a string holds an unknown escape");
      }
    }
  }

  bool digit_at(size_t at) const { return at < text_.size() && text_[at] >= '0' && text_[at] <= '9'; }

  // JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  Value number() {
    const size_t start = at_;
    if (at_ < text_.size() && text_[at_] == '-') ++at_;
    if (!digit_at(at_)) fail("unexpected character");
    if (text_[at_] == '0' && digit_at(at_ + 1)) fail("a number has a leading zero");
    while (digit_at(at_)) ++at_;
    bool integral = true;
    if (at_ < text_.size() && text_[at_] == '.') {
      integral = false;
      if (!digit_at(++at_)) fail("a number's fraction has no digits");
      while (digit_at(at_)) ++at_;
    }
    if (at_ < text_.size() && (text_[at_] == 'e' || text_[at_] == 'E')) {
      integral = false;
      ++at_;
      if (at_ < text_.size() && (text_[at_] == '+' || text_[at_] == '-')) ++at_;
      if (!digit_at(at_)) fail("a number's exponent has no digits");
      while (digit_at(at_)) ++at_;
    }
    const char* const begin = text_.data() + start;
    const char* const end = text_.data() + at_;
    if (integral) {
      int64_t signed_number = 0;
      if (std::from_chars(begin, end, signed_number).ec == std::errc()) return signed_number;
      uint64_t unsigned_number = 0;
      if (std::from_chars(begin, end, unsigned_number).ec == std::errc()) return unsigned_number;
    }
    double real = 0;
    if (std::from_chars(begin, end, real).ec != std::errc()) fail("a number is out of range");
    return real;
  }

  std::string_view text_;
  size_t max_depth_;
  size_t at_ = 0;
};

}  // namespace

std::string json_text(const Value& value, int indent) {
  std::string out;
  append_json(out, value, indent, 0);
  return out;
}

Value parse_json_text(std::string_view text, size_t max_depth) { return JsonTextReader(text, max_depth).document(); }

}  // namespace seqflow
