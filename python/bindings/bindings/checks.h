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
// One name (a str) or an iterable of names, as a list; each checked, named by its position.
nanobind::list check_names(nanobind::handle values, const std::string& parameter);
nanobind::object check_path(nanobind::handle value, std::string_view parameter);
int64_t check_count(nanobind::handle value, std::string_view parameter, int64_t minimum = 0,
                    int64_t maximum = std::numeric_limits<int64_t>::max());
// `values` (integers, or a 1-D integer array) as a list of positions in [0, size); ValueError naming the
// parameter otherwise.
nanobind::list positions(nanobind::handle values, int64_t size, const std::string& parameter);

}  // namespace seqflow::bindings
