// Integer arguments of the bound methods that take them as they come (seqflow._arguments checks the
// Python functions' the same way): an int
// or a numpy integer, never a bool or a float (which would be truncated);
// errors name the parameter and the value.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

namespace seqflow::bindings {

// The value as a Python int, or nullopt when it is not an integer.
std::optional<nanobind::int_> python_integer(nanobind::handle value);

// "`name` must be an integer, got ..." or "`name` = N is outside the int64
// range" (or "outside low..high" when the range is narrower).
int64_t int_argument(nanobind::handle value, std::string_view name, int64_t low = std::numeric_limits<int64_t>::min(),
                     int64_t high = std::numeric_limits<int64_t>::max());

// None, or an int_argument.
std::optional<int64_t> optional_int_argument(nanobind::handle value, std::string_view name);

}  // namespace seqflow::bindings
