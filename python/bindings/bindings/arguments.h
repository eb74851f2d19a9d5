// Typed parameters of the bound methods that users call directly (Workload's,
// PackPlan's accessors): nanobind derives their signatures (int, str,
// str | os.PathLike), and a wrong argument is an error that names the
// parameter and the value, as seqflow._arguments and seqflow._checks say it
// for the Python functions. The parameter's name is part of its type.
#pragma once

#include <nanobind/nanobind.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace seqflow::bindings {

// A parameter's name as a template argument.
template <size_t N>
struct ParameterName {
  constexpr ParameterName(const char (&text)[N]) { std::copy_n(text, N, chars); }
  constexpr std::string_view view() const { return {chars, N - 1}; }
  char chars[N];
};

// The conversions of the parameters below (argument_conversion.cc); each
// throws as its parameter's comment says.
int64_t integer_argument(nanobind::handle value, std::string_view name);
std::vector<int64_t> integers_argument(nanobind::handle values, std::string_view name);
std::string text_argument(nanobind::handle value, std::string_view name);
std::filesystem::path path_argument(nanobind::handle value, std::string_view name);
bool int_list(nanobind::handle value, std::vector<int64_t>& out) noexcept;

// An integer (what has __index__: an int, a numpy or torch integer), never a
// bool or a float (which would be truncated): "`name` must be an integer, got
// 1.5" or "`name` = 2**63 is outside the int64 range" otherwise.
template <ParameterName Name>
struct IntegerParameter {
  static constexpr auto stub = nanobind::detail::const_name("int");
  static int64_t convert(nanobind::handle value, std::string_view name) { return integer_argument(value, name); }
  int64_t value = 0;
  operator int64_t() const { return value; }
};

// None or an IntegerParameter (nanobind's std::optional caster may not
// throw); its default, None, adds "| None" to the stub.
template <ParameterName Name>
struct OptionalIntegerParameter {
  static constexpr auto stub = nanobind::detail::const_name("int");
  static std::optional<int64_t> convert(nanobind::handle value, std::string_view name) {
    if (value.is_none()) return std::nullopt;
    return integer_argument(value, name);
  }
  std::optional<int64_t> value;
};

// An iterable (a list, a tuple, a 1-D array) of integers, not a str:
// "`name`[i] must be an integer, got 1.5".
template <ParameterName Name>
struct IntegersParameter {
  static constexpr auto stub = nanobind::detail::const_name("collections.abc.Sequence[int]");
  static std::vector<int64_t> convert(nanobind::handle values, std::string_view name) {
    return integers_argument(values, name);
  }
  std::vector<int64_t> value;
};

// A str (a bytes or a path is no str).
template <ParameterName Name>
struct TextParameter {
  static constexpr auto stub = nanobind::detail::const_name("str");
  static std::string convert(nanobind::handle value, std::string_view name) { return text_argument(value, name); }
  std::string value;
};

// A str or an os.PathLike, without NUL, at most 4096 bytes of UTF-8.
template <ParameterName Name>
struct PathParameter {
  static constexpr auto stub = nanobind::detail::const_name("str | os.PathLike");
  static std::filesystem::path convert(nanobind::handle value, std::string_view name) {
    return path_argument(value, name);
  }
  std::filesystem::path value;
};

// A list of ints only (no subclass, no numpy integer), each within int64:
// the balancing functions' fast path for the lists users pass (numpy's
// conversion of a list costs more than the balancing of a few thousand
// lengths). Anything else does not convert, without an error of its own:
// the Python function then converts it with numpy, whose errors name the
// index and the value.
struct IntList {
  std::vector<int64_t> values;
};

// A wrong argument's type: seqflow's ArgumentTypeError (a TypeError that is
// also a ValueError), raised by the module's exception translator.
class ArgumentTypeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A file that is not there: FileNotFoundError(ENOENT, message, path).
class MissingFile : public std::runtime_error {
 public:
  MissingFile(const std::string& message, std::string path) : std::runtime_error(message), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace seqflow::bindings

namespace nanobind::detail {

// Any of the parameter types above: named by its stub, converted by its convert.
template <template <seqflow::bindings::ParameterName> class Kind, seqflow::bindings::ParameterName Parameter>
struct type_caster<Kind<Parameter>> {
  NB_TYPE_CASTER(Kind<Parameter>, Kind<Parameter>::stub)
  bool from_python(handle src, uint32_t, cleanup_list*) {
    value.value = Kind<Parameter>::convert(src, Parameter.view());
    return true;
  }
};

template <>
struct type_caster<seqflow::bindings::IntList> {
  NB_TYPE_CASTER(seqflow::bindings::IntList, const_name("list[int]"))
  bool from_python(handle src, uint32_t, cleanup_list*) noexcept {
    return seqflow::bindings::int_list(src, value.values);
  }
};

}  // namespace nanobind::detail
