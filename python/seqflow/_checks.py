"""Checks of the arguments of seqflow's public calls, made before any engine
call (python/bindings/checks.cc: the messages, the name rule, the bounds)."""

from seqflow._seqflow.checks import (
    ArgumentTypeError,
    INT64_MAX,
    INT64_MIN,
    MAX_NAME_BYTES,
    MAX_PATH_BYTES,
    MAX_SECONDS,
    check_bool,
    check_choice,
    check_count,
    check_instance,
    check_int64,
    check_int64_list,
    check_list,
    check_name,
    check_names,
    check_optional_bool,
    check_optional_name,
    check_path,
    check_seconds,
    check_tag,
    short_repr,
)

__all__ = [
    "ArgumentTypeError", "INT64_MAX", "INT64_MIN", "MAX_NAME_BYTES", "MAX_PATH_BYTES", "MAX_SECONDS", "check_bool",
    "check_choice", "check_count", "check_instance", "check_int64", "check_int64_list", "check_list", "check_name",
    "check_names", "check_optional_bool", "check_optional_name", "check_path", "check_seconds", "check_tag",
    "short_repr",
]
