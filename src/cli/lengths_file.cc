#include "cli/lengths_file.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "seqflow/error.h"

namespace seqflow::cli {

namespace {

constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// Where the integers come from, for error messages, and what they must be.
struct Source {
  std::string name;       // "FILE 'lengths.txt'" or "FILE (stdin)"
  std::string_view what;  // "length" or "group id"
  bool non_negative;
};

// "<source> <where>: <message>", e.g. "FILE 'a.txt' line 3: 'x' is not an integer".
[[noreturn]] void fail(const Source& source, const std::string& where, const std::string& message) {
  throw_invalid(source.name + (where.empty() ? "" : " " + where) + ": " + message);
}

int64_t checked(const Source& source, const std::string& where, int64_t value) {
  if (source.non_negative && value < 0) {
    fail(source, where,
         std::string(source.what) + " " + std::to_string(value) + " is negative; " + std::string(source.what) +
             "s must be >= 0");
  }
  return value;
}

std::string quoted_excerpt(std::string_view text) {
  constexpr size_t kMax = 40;
  return std::string("'").append(text.substr(0, kMax)).append(text.size() > kMax ? "...'" : "'");
}

std::string_view trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n\v\f";
  const size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

std::string read_all(const std::string& path, const Source& source) {
  std::ostringstream buffer;
  if (path == "-") {
    buffer << std::cin.rdbuf();
    return buffer.str();
  }
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) fail(source, "", "is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(source, "", std::string("cannot open: ") + std::strerror(errno));
  buffer << in.rdbuf();
  if (in.bad()) fail(source, "", std::string("cannot read: ") + std::strerror(errno));
  return buffer.str();
}

std::vector<int64_t> parse_lines(std::string_view text, const Source& source) {
  std::vector<int64_t> out;
  for (size_t line_number = 1; !text.empty(); ++line_number) {
    const size_t newline = text.find('\n');
    const std::string_view line = trim(text.substr(0, newline));
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    if (line.empty()) continue;
    const std::string where = "line " + std::to_string(line_number);
    int64_t value = 0;
    auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), value);
    if (error == std::errc::result_out_of_range) {
      fail(source, where, quoted_excerpt(line) + " is out of the int64 range");
    }
    if (error != std::errc() || end != line.data() + line.size()) {
      fail(source, where, quoted_excerpt(line) + " is not an integer");
    }
    out.push_back(checked(source, where, value));
  }
  return out;
}

std::vector<int64_t> parse_json(std::string_view text, const Source& source) {
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // Drop nlohmann's "[json.exception.parse_error.101] " prefix.
    std::string_view message = e.what();
    if (auto bracket = message.find("] "); bracket != std::string_view::npos) {
      message.remove_prefix(bracket + 2);
    }
    fail(source, "", "not a valid JSON list: " + std::string(message));
  }
  if (!document.is_array()) fail(source, "", "expected a JSON list of integers");
  std::vector<int64_t> out;
  out.reserve(document.size());
  for (size_t i = 0; i < document.size(); ++i) {
    const nlohmann::json& item = document[i];
    const std::string where = "element [" + std::to_string(i) + "]";
    if (item.is_number_unsigned()) {
      const auto value = item.get<uint64_t>();
      if (value > kInt64Max) fail(source, where, item.dump() + " is out of the int64 range");
      out.push_back(static_cast<int64_t>(value));
    } else if (item.is_number_integer()) {
      out.push_back(checked(source, where, item.get<int64_t>()));
    } else {
      fail(source, where, item.dump() + " is not an integer");
    }
  }
  return out;
}

// ---- .npy ------------------------------------------------------------------

constexpr std::string_view kNpyMagic = "\x93NUMPY";
constexpr std::string_view kNpyDtypes = "a little-endian integer dtype: <i1, <i2, <i4, <i8, <u1, <u2, <u4 or <u8";

struct NpyDtype {
  std::string_view code;  // descr without the byte-order character
  size_t size;
  bool is_signed;
};

constexpr NpyDtype kIntegerDtypes[] = {
    {"i1", 1, true},  {"i2", 2, true},  {"i4", 4, true},  {"i8", 8, true},
    {"u1", 1, false}, {"u2", 2, false}, {"u4", 4, false}, {"u8", 8, false},
};

uint64_t little_endian(std::string_view bytes) {
  uint64_t value = 0;
  for (size_t b = 0; b < bytes.size(); ++b) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[b])) << (8 * b);
  }
  return value;
}

// The text after "'key':" in the header dict, e.g. "'<i8', 'fortran_order': ...".
std::string_view header_value(std::string_view header, std::string_view key, const Source& source) {
  size_t at = std::string_view::npos;
  for (char quote : {'\'', '"'}) {
    at = header.find(quote + std::string(key) + quote);
    if (at != std::string_view::npos) break;
  }
  if (at == std::string_view::npos) {
    fail(source, "", ".npy header has no '" + std::string(key) + "'");
  }
  std::string_view rest = trim(header.substr(at + key.size() + 2));
  if (!rest.starts_with(':')) {
    fail(source, "", ".npy header is malformed near '" + std::string(key) + "'");
  }
  return trim(rest.substr(1));
}

std::string parse_descr(std::string_view header, const Source& source) {
  std::string_view value = header_value(header, "descr", source);
  const char quote = value.empty() ? '\0' : value.front();
  const size_t end = value.find(quote, 1);
  if ((quote != '\'' && quote != '"') || end == std::string_view::npos) {
    fail(source, "",
         "structured .npy dtype " + quoted_excerpt(value) + " is not supported; expected " + std::string(kNpyDtypes));
  }
  return std::string(value.substr(1, end - 1));
}

const NpyDtype& find_dtype(const std::string& descr, const Source& source) {
  const std::string_view code = descr.empty() ? "" : std::string_view(descr).substr(1);
  for (const NpyDtype& dtype : kIntegerDtypes) {
    if (dtype.code != code) continue;
    const char order = descr.front();
    if (order == '<' || (order == '|' && dtype.size == 1)) return dtype;
    if (order == '>' && dtype.size > 1) {
      fail(source, "",
           ".npy dtype '" + descr + "' is big-endian; expected " + std::string(kNpyDtypes) +
               " (convert with arr.astype('<i8'))");
    }
  }
  fail(source, "", ".npy dtype '" + descr + "' is not supported; expected " + std::string(kNpyDtypes));
}

std::vector<uint64_t> parse_shape(std::string_view header, const Source& source) {
  std::string_view value = header_value(header, "shape", source);
  const size_t close = value.find(')');
  if (!value.starts_with('(') || close == std::string_view::npos) {
    fail(source, "", ".npy header has a malformed shape " + quoted_excerpt(value));
  }
  std::vector<uint64_t> dims;
  std::string_view inside = value.substr(1, close - 1);
  while (!inside.empty()) {
    const size_t comma = inside.find(',');
    const std::string_view dim = trim(inside.substr(0, comma));
    inside.remove_prefix(comma == std::string_view::npos ? inside.size() : comma + 1);
    if (dim.empty()) continue;
    uint64_t size = 0;
    auto [end, error] = std::from_chars(dim.data(), dim.data() + dim.size(), size);
    if (error != std::errc() || end != dim.data() + dim.size()) {
      fail(source, "", ".npy header has a malformed shape " + quoted_excerpt(value.substr(0, close + 1)));
    }
    dims.push_back(size);
  }
  if (dims.size() != 1) {
    fail(source, "",
         ".npy array has " + std::to_string(dims.size()) + " dimensions (shape " +
             std::string(value.substr(0, close + 1)) + "); expected a 1-D array");
  }
  return dims;
}

std::vector<int64_t> parse_npy(std::string_view data, const Source& source) {
  const std::string truncated = "truncated .npy file";
  if (data.size() < 10) fail(source, "", truncated);
  const auto major = static_cast<unsigned char>(data[6]);
  size_t header_start = 10;
  size_t header_size = 0;
  if (major == 1) {
    header_size = little_endian(data.substr(8, 2));
  } else if (major == 2 || major == 3) {
    header_start = 12;
    if (data.size() < header_start) fail(source, "", truncated);
    header_size = little_endian(data.substr(8, 4));
  } else {
    fail(source, "", "unsupported .npy format version " + std::to_string(major));
  }
  if (data.size() - header_start < header_size) fail(source, "", truncated + " (header)");
  const std::string_view header = data.substr(header_start, header_size);

  const std::string descr = parse_descr(header, source);
  const std::string_view fortran_order = header_value(header, "fortran_order", source);
  if (!fortran_order.starts_with("False")) {
    fail(source, "",
         ".npy fortran_order is not False; save a C-ordered array "
         "(np.save(path, np.ascontiguousarray(arr)))");
  }
  const uint64_t count = parse_shape(header, source)[0];
  const NpyDtype& dtype = find_dtype(descr, source);

  const std::string_view payload = data.substr(header_start + header_size);
  if (count > payload.size() / dtype.size) {
    fail(source, "",
         truncated + ": shape (" + std::to_string(count) + ",) of '" + descr + "' needs " +
             std::to_string(count * dtype.size) + " bytes of data, found " + std::to_string(payload.size()));
  }
  std::vector<int64_t> out;
  out.reserve(count);
  const unsigned unused_bits = 64 - 8 * static_cast<unsigned>(dtype.size);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t bits = little_endian(payload.substr(i * dtype.size, dtype.size));
    const std::string where = "element [" + std::to_string(i) + "]";
    if (!dtype.is_signed && bits > kInt64Max) {
      fail(source, where, std::to_string(bits) + " is out of the int64 range");
    }
    // Sign-extend: shift the value's top bit to bit 63, then shift back arithmetically.
    const int64_t value =
        dtype.is_signed ? static_cast<int64_t>(bits << unused_bits) >> unused_bits : static_cast<int64_t>(bits);
    out.push_back(checked(source, where, value));
  }
  return out;
}

std::vector<int64_t> read_integers(const std::string& path, const Source& source) {
  const std::string data = read_all(path, source);
  std::vector<int64_t> out;
  if (std::string_view(data).starts_with(kNpyMagic)) {
    out = parse_npy(data, source);
  } else if (trim(data).starts_with('[')) {
    out = parse_json(data, source);
  } else {
    out = parse_lines(data, source);
  }
  if (out.empty()) fail(source, "", "contains no " + std::string(source.what) + "s");
  return out;
}

std::string source_name(const std::string& path, std::string_view parameter) {
  return std::string(parameter) + (path == "-" ? " (stdin)" : " '" + path + "'");
}

}  // namespace

std::vector<int64_t> read_lengths(const std::string& path, std::string_view parameter) {
  return read_integers(path, Source{source_name(path, parameter), "length", true});
}

std::vector<int64_t> read_group_ids(const std::string& path, std::string_view parameter) {
  return read_integers(path, Source{source_name(path, parameter), "group id", false});
}

}  // namespace seqflow::cli
