// Checks of the arguments of seqflow's public Python calls, made before any
// engine call: a bad argument raises one message naming the parameter and its
// value, the same in embedded and remote mode.
//
// Wrong type: ArgumentTypeError, a TypeError that is also a ValueError
// (seqflow raised ValueError for these before, and callers catch that).
// Right type, wrong value: ValueError.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "bindings/cached_attribute.h"

namespace seqflow::bindings {

// type(value).__name__, str(value), repr(value).
std::string type_name_of(nanobind::handle value);
std::string str_text(nanobind::handle value);
std::string repr_text(nanobind::handle value);

// module.name, as a new reference the caller keeps (see CachedAttribute for a lookup kept per process).
nanobind::handle python_attribute(const char* module, const char* name);

// Raises ArgumentTypeError(message).
[[noreturn]] void throw_argument_type_error(const std::string& message);

// repr(value), at most 80 characters of it and the length when longer.
std::string short_repr(nanobind::handle value);

// "`parameter` must be <description>, got <type> <short repr>" as ArgumentTypeError.
[[noreturn]] void throw_wrong_type(nanobind::handle value, std::string_view parameter, std::string_view description);

nanobind::object check_path(nanobind::handle value, std::string_view parameter);

}  // namespace seqflow::bindings
