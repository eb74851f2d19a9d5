"""Checks of the arguments of seqflow's public calls, made before any engine
call. A message names the parameter and the value; a value of the wrong type
raises ArgumentTypeError (a TypeError and a ValueError, since callers of
TransferQueue's API catch either)."""

from __future__ import annotations

import math
import operator
import os
from typing import Any, Iterable, Optional

import numpy as np

from seqflow._seqflow import limits
from seqflow._seqflow.checks import ArgumentTypeError

__all__ = [
    "ArgumentTypeError", "INT64_MAX", "INT64_MIN", "MAX_NAME_BYTES", "MAX_PATH_BYTES", "MAX_SECONDS", "check_bool",
    "check_choice", "check_count", "check_dicts", "check_instance", "check_int64", "check_int64_list", "check_list",
    "check_name", "check_names", "check_optional_bool", "check_optional_name", "check_path", "check_seconds",
    "check_tag", "short_repr",
]

MAX_NAME_BYTES: int = limits.MAX_NAME_BYTES
# Paths go to the file system, whose own limit (PATH_MAX) is larger than a name's.
MAX_PATH_BYTES = 4096
# About 31 years: a deadline of now plus more would overflow the engine's clock (int64 nanoseconds).
MAX_SECONDS = 1e9
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
_SHORT_REPR = 80


def short_repr(value: Any) -> str:
    """repr(value), cut to 80 characters (a message must not quote a whole batch)."""
    text = repr(value)
    if len(text) <= _SHORT_REPR:
        return text
    return f"{text[:_SHORT_REPR]}... ({len(text)} characters)"


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def _is_integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not _is_bool(value)


def _wrong_type(value: Any, parameter: str, description: str) -> ArgumentTypeError:
    return ArgumentTypeError(f"{parameter} must be {description}, got {type(value).__name__} {short_repr(value)}")


def _checked_text(text: str, limit: int, value: Any, parameter: str) -> str:
    """`text` (what the caller gave as `value`) if it follows the name rule with this byte limit."""
    problem = _text_problem(text, limit)
    if problem:
        raise ValueError(f"{parameter} {problem}, got {short_repr(value)}")
    return text


def _text_problem(text: str, limit: int) -> Optional[str]:
    """What breaks the name rule in `text`, or None."""
    if not text:
        return "must not be empty"
    if "\x00" in text:
        return "must not contain NUL ('\\x00')"
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return "must be valid UTF-8 (it holds a lone surrogate)"
    if size > limit:
        return f"must be at most {limit} bytes of UTF-8, has {size}"
    return None


def check_name(value: Any, parameter: str) -> str:
    """`value` if it follows the name rule: a non-empty str of valid UTF-8
    without NUL, at most MAX_NAME_BYTES bytes."""
    if _is_plain_name(value):
        return value
    if not isinstance(value, str):
        raise _wrong_type(value, parameter, "a str")
    return _checked_text(value, MAX_NAME_BYTES, value, parameter)


def _is_plain_name(value: Any) -> bool:
    """The usual name: an ASCII str of a usual length without NUL (checked first: every call names things)."""
    return type(value) is str and 0 < len(value) <= MAX_NAME_BYTES and value.isascii() and "\x00" not in value


def check_optional_name(value: Any, parameter: str) -> Optional[str]:
    return None if value is None else check_name(value, parameter)


def check_names(values: Any, parameter: str) -> list[str]:
    """One name (a str) or an iterable of names, as a list; each checked, named by its position."""
    if isinstance(values, str):
        return [check_name(values, parameter)]
    if type(values) is not list and (isinstance(values, (bytes, bytearray)) or not hasattr(values, "__iter__")):
        raise _wrong_type(values, parameter, "a str or a list of str")
    names = list(values)
    if not _all_plain_names(names):
        for i, name in enumerate(names):
            check_name(name, f"{parameter}[{i}]")
    return names


def _all_plain_names(names: list) -> bool:
    """Every name a usual ASCII str of a usual length; the slow path names
    the first that is not. A few names one by one; many (kv_batch_put of
    100k keys) at C speed, joined."""
    if len(names) <= 16:
        for name in names:  # inline: a call per name would double get_meta's checks
            if not (type(name) is str and 0 < len(name) <= MAX_NAME_BYTES and name.isascii() and "\x00" not in name):
                return False
        return True
    if not all(type(name) is str for name in names):
        return False
    joined = "".join(names)
    return (joined.isascii() and "\x00" not in joined
            and 0 < min(map(len, names)) and max(map(len, names)) <= MAX_NAME_BYTES)


def check_path(value: Any, parameter: str) -> str:
    """A str or os.PathLike naming a file or directory, as a str."""
    path = value if isinstance(value, str) else os.fspath(value) if hasattr(type(value), "__fspath__") else None
    if not isinstance(path, str):
        raise _wrong_type(value, parameter, "a str or an os.PathLike")
    return _checked_text(path, MAX_PATH_BYTES, value, parameter)


def check_bool(value: Any, parameter: str) -> bool:
    """A real bool: a string such as 'false' would be true by truthiness."""
    if not _is_bool(value):
        raise ArgumentTypeError(f"{parameter} must be True or False, got {short_repr(value)}")
    return bool(value)


def check_optional_bool(value: Any, parameter: str) -> Optional[bool]:
    return None if value is None else check_bool(value, parameter)


def check_count(value: Any, parameter: str, *, minimum: int = 0, maximum: int = INT64_MAX) -> int:
    """An integer (not a bool, not a float) in [minimum, maximum]."""
    if type(value) is int and minimum <= value <= maximum:
        return value
    if not _is_integer(value):
        raise ArgumentTypeError(f"{parameter} must be an integer, got {short_repr(value)}")
    number = int(value)
    if number < minimum:
        raise ValueError(f"{parameter} must be >= {minimum}, got {value}")
    if number > maximum:
        raise ValueError(f"{parameter} must be <= {maximum}, got {value}")
    return number


def check_parts(value: Any, parameter: str) -> int:
    """A number of parts (chunks): an integer >= 1, not a bool; ValueError otherwise."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise ValueError(f"{parameter} must be an integer >= 1, got {value!r}")
    count = operator.index(value)
    if count < 1:
        raise ValueError(f"{parameter} must be an integer >= 1, got {count}")
    return count


def check_positions(values: Any, size: int, parameter: str) -> list[int]:
    """Integers (or a 1-D integer array) as positions in [0, size); ValueError naming the parameter otherwise."""
    if isinstance(values, np.ndarray):
        if values.size == 0:
            return []
        if values.ndim != 1 or values.dtype.kind not in "iu":
            raise ValueError(f"{parameter} must be a list of integer positions, got {values!r}")
        items = values.tolist()
    else:
        items = list(values)
    if not all(type(item) is int for item in items):
        try:
            as_array = np.asarray(items)  # numpy integers at C speed; bools alone, floats and others below
        except (TypeError, ValueError):
            as_array = None
        if as_array is not None and as_array.ndim == 1 and as_array.dtype.kind in "iu":
            items = as_array.tolist()
    if not all(type(item) is int for item in items):
        if not all(_is_integer(item) or _is_bool(item) for item in items) or all(_is_bool(item) for item in items):
            # numpy reads a list of bools only as a mask (refused), a mix with integers as integers.
            raise ValueError(f"{parameter} must be a list of integer positions, got {values!r}")
        items = [operator.index(item) for item in items]
    if not all(0 <= item < size for item in items):
        raise ValueError(f"{parameter} must lie in [0, {size}), got {items!r}")
    return items


def check_int64(value: Any, parameter: str) -> int:
    return check_count(value, parameter, minimum=INT64_MIN)


def check_int64_list(values: Any, parameter: str) -> np.ndarray:
    """An integer or an iterable of integers (no bools, no floats), each in int64's range, as an int64 array."""
    if _is_integer(values):
        return np.array([check_int64(values, parameter)], dtype=np.int64)
    if isinstance(values, (str, bytes, bytearray)) or _is_bool(values) or not hasattr(values, "__iter__"):
        raise ArgumentTypeError(f"{parameter} must be an integer or a list of integers, got {short_repr(values)}")
    if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype.kind == "i":
        return np.ascontiguousarray(values, dtype=np.int64)
    items = list(values)
    if all(type(item) is int for item in items):
        try:
            return np.array(items, dtype=np.int64)
        except OverflowError:
            pass  # the loop below names the item
    return np.array([check_int64(item, f"{parameter}[{i}]") for i, item in enumerate(items)], dtype=np.int64)


def check_seconds(value: Any, parameter: str, *, allow_zero: bool = False) -> float:
    """A finite number of seconds, > 0 (or >= 0 with allow_zero), at most MAX_SECONDS."""
    if not (_is_integer(value) or isinstance(value, (float, np.floating))):
        raise ArgumentTypeError(f"{parameter} must be a number of seconds, got {short_repr(value)}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not allow_zero) or seconds > MAX_SECONDS:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{parameter} must be a finite number of seconds {bound} and <= 1e+09, got {value!r}")
    return seconds


def check_number(value: Any, parameter: str) -> float:
    """A real number (an int or a float, not a bool), as a float; its range is checked where it is used."""
    if not (_is_integer(value) or isinstance(value, (float, np.floating))):
        raise ArgumentTypeError(f"{parameter} must be a number, got {type(value).__name__} {short_repr(value)}")
    return float(value)


def check_choice(value: Any, parameter: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{parameter} must be one of {choices}, got {short_repr(value)}")
    return value


def check_instance(value: Any, parameter: str, kind: Any, description: str) -> Any:
    """`value` if it is a `kind` (described to the user as `description`)."""
    if not isinstance(value, kind):
        raise _wrong_type(value, parameter, description)
    return value


def check_tag(value: Any, parameter: str) -> Optional[dict]:
    """A tag (kv_put) or one custom_meta entry: None or a dict whose keys are names."""
    if value is None:
        return None
    check_instance(value, parameter, dict, "a dict or None")
    for key in value:
        check_name(key, f"{parameter} key")
    return value


def check_list(value: Any, parameter: str, description: str) -> list:
    """A list or tuple (not a str or a dict, whose items would be read as entries), as a list."""
    if not isinstance(value, (list, tuple)):
        raise _wrong_type(value, parameter, description)
    return list(value)


def check_dicts(values: Iterable[Any], parameter: str) -> None:
    """Each item a dict, named by its position."""
    for i, entry in enumerate(values):
        check_instance(entry, f"{parameter}[{i}]", dict, "a dict")
