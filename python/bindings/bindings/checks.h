// Checks of the arguments of seqflow's public Python calls, made before any
// engine call: a bad argument raises one message naming the parameter and its
// value, the same in embedded and remote mode.
//
// Wrong type: ArgumentTypeError, a TypeError that is also a ValueError
// (seqflow raised ValueError for these before, and callers catch that).
// Right type, wrong value: ValueError.
//
// Names (fields, partition ids, keys, tag keys, task names, the Ray service
// name) follow one rule: a non-empty str of at most kMaxNameBytes bytes of
// UTF-8 (no lone surrogates), without NUL, which C strings would cut off. The
// controller applies the same rule (src/core/name_rule.h) to other callers.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "bindings/cached_attribute.h"

namespace seqflow::bindings {

// The C++ client's bound of busy_poll_us: beyond a second, sleeping is cheaper.
inline constexpr int64_t kMaxBusyPollUs = 1'000'000;

// The exception type seqflow._checks.ArgumentTypeError.
PyObject* argument_type_error();

// list(values); a TypeError, as list() raises, for one that is not iterable.
nanobind::list list_of(nanobind::handle values);

// type(value).__name__, str(value), repr(value), isinstance(value, collections.abc.Mapping).
std::string type_name_of(nanobind::handle value);
std::string str_text(nanobind::handle value);
std::string repr_text(nanobind::handle value);
bool is_mapping(nanobind::handle value);
// isinstance(value, numpy.ndarray); false without numpy.
bool is_ndarray(nanobind::handle value);

// module.name, as a new reference the caller keeps (see CachedAttribute for a lookup kept per process).
nanobind::handle python_attribute(const char* module, const char* name);

// Raises ArgumentTypeError(message).
[[noreturn]] void throw_argument_type_error(const std::string& message);

// repr(value), at most 80 characters of it and the length when longer.
std::string short_repr(nanobind::handle value);

// "`parameter` must be <description>, got <type> <short repr>" as ArgumentTypeError.
[[noreturn]] void throw_wrong_type(nanobind::handle value, std::string_view parameter, std::string_view description);

nanobind::object check_name(nanobind::handle value, std::string_view parameter);
nanobind::object check_optional_name(nanobind::handle value, const std::string& parameter);
// One name (a str) or an iterable of names, as a list; each checked, named by its position.
nanobind::list check_names(nanobind::handle values, const std::string& parameter);
nanobind::object check_path(nanobind::handle value, std::string_view parameter);
bool check_bool(nanobind::handle value, std::string_view parameter);
int64_t check_count(nanobind::handle value, std::string_view parameter, int64_t minimum = 0,
                    int64_t maximum = std::numeric_limits<int64_t>::max());
double check_seconds(nanobind::handle value, std::string_view parameter, bool allow_zero = false);
// None or a dict whose keys are names (a tag, one custom_meta entry).
nanobind::object check_tag(nanobind::handle value, const std::string& parameter);
// A list or tuple (not a str or a dict, whose items would be read as entries), as a list.
nanobind::list check_list(nanobind::handle value, const std::string& parameter, const std::string& description);
std::optional<bool> check_optional_bool(nanobind::handle value, const std::string& parameter);
int64_t check_int64(nanobind::handle value, const std::string& parameter);
// An integer or an iterable of integers, each in int64's range, as an int64 numpy array.
nanobind::object check_int64_list(nanobind::handle values, const std::string& parameter);
// `value` if it is one of the str `choices`.
nanobind::object check_choice(nanobind::handle value, const std::string& parameter, nanobind::tuple choices);
// `values` (integers, or a 1-D integer array) as a list of positions in [0, size); ValueError naming the
// parameter otherwise.
nanobind::list positions(nanobind::handle values, int64_t size, const std::string& parameter);
nanobind::object check_instance(nanobind::handle value, std::string_view parameter, nanobind::handle kind,
                                std::string_view description);

}  // namespace seqflow::bindings
