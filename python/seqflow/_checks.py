"""Checks of the arguments of seqflow's public calls, made in Python before
any native call: a bad argument raises one message naming the parameter and
its value, the same in embedded and remote mode, and never the bindings',
the standard library's or torch's own message.

Wrong type: ArgumentTypeError, a TypeError that is also a ValueError
(seqflow raised ValueError for these before, and callers catch that).
Right type, wrong value: ValueError.

Names (fields, partition ids, keys, tag keys, task names, the Ray service
name) follow one rule: a non-empty str of at most MAX_NAME_BYTES bytes of
UTF-8 (no lone surrogates), without NUL, which C strings would cut off.
The controller applies the same rule (src/core/name_rule.h) to callers
other than this client.
"""

from __future__ import annotations

import math
import os
from typing import Any, Optional

import numpy as np

from seqflow import _seqflow

MAX_NAME_BYTES = _seqflow.limits.MAX_NAME_BYTES
# Paths go to the file system, whose own limit (PATH_MAX) is larger than a name's.
MAX_PATH_BYTES = 4096
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong type."""


def short_repr(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _text_problem(text: str, limit: int) -> Optional[str]:
    """What breaks the name rule in `text`, or None."""
    if not text:
        return "must not be empty"
    if "\0" in text:
        return "must not contain NUL ('\\x00')"
    if text.isascii():
        size = len(text)
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            return "must be valid UTF-8 (it holds a lone surrogate)"
    if size > limit:
        return f"must be at most {limit} bytes of UTF-8, has {size}"
    return None


def check_name(value, parameter: str) -> str:
    """`value` if it follows the name rule (see the module's docstring)."""
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{parameter} must be a str, got {type(value).__name__} {short_repr(value)}")
    problem = _text_problem(value, MAX_NAME_BYTES)
    if problem is not None:
        raise ValueError(f"{parameter} {problem}, got {short_repr(value)}")
    return value


def check_optional_name(value, parameter: str) -> Optional[str]:
    return None if value is None else check_name(value, parameter)


def check_names(values, parameter: str) -> list[str]:
    """One name (a str) or an iterable of names, as a list; each checked,
    named by its position."""
    if isinstance(values, str):
        return [check_name(values, parameter)]
    if isinstance(values, (bytes, bytearray)) or not hasattr(values, "__iter__"):
        raise ArgumentTypeError(f"{parameter} must be a str or a list of str, got {type(values).__name__} "
                                f"{short_repr(values)}")
    names = list(values)
    try:  # all at once, at C speed, for the usual ASCII names (kv_batch_put of 100k keys)
        joined = "".join(names)
    except TypeError:
        joined = None
    if joined is None or not joined.isascii() or "\0" in joined or (
            names and not 0 < min(map(len, names)) <= max(map(len, names)) <= MAX_NAME_BYTES):
        for i, name in enumerate(names):
            check_name(name, f"{parameter}[{i}]")
    return names


def check_path(value, parameter: str) -> str:
    """A str or os.PathLike naming a file or directory, as a str."""
    path = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(path, str):
        raise ArgumentTypeError(f"{parameter} must be a str or an os.PathLike, got {type(value).__name__} "
                                f"{short_repr(value)}")
    problem = _text_problem(path, MAX_PATH_BYTES)
    if problem is not None:
        raise ValueError(f"{parameter} {problem}, got {short_repr(value)}")
    return path


def check_bool(value, parameter: str) -> bool:
    """A real bool: a string such as 'false' would be true by truthiness."""
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{parameter} must be True or False, got {short_repr(value)}")
    return bool(value)


def check_optional_bool(value, parameter: str) -> Optional[bool]:
    return None if value is None else check_bool(value, parameter)


def check_count(value, parameter: str, *, minimum: int = 0, maximum: int = INT64_MAX) -> int:
    """An integer (not a bool, not a float) in [minimum, maximum]; the
    default bounds are those of an int64 count."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ArgumentTypeError(f"{parameter} must be an integer, got {short_repr(value)}")
    if value < minimum:
        raise ValueError(f"{parameter} must be >= {minimum}, got {value}")
    if value > maximum:
        raise ValueError(f"{parameter} must be <= {maximum}, got {value}")
    return int(value)


def check_int64(value, parameter: str) -> int:
    return check_count(value, parameter, minimum=INT64_MIN)


def check_int64_list(values, parameter: str) -> np.ndarray:
    """An integer or an iterable of integers (no bools, no floats), each in
    int64's range, as an int64 array; a bad one named by its position."""
    if isinstance(values, (int, np.integer)) and not isinstance(values, (bool, np.bool_)):
        values = [values]
    if isinstance(values, (str, bytes, bytearray, bool, np.bool_)) or not hasattr(values, "__iter__"):
        raise ArgumentTypeError(f"{parameter} must be an integer or a list of integers, got {short_repr(values)}")
    values = values if isinstance(values, np.ndarray) else list(values)
    array = np.asarray(values)
    if array.ndim != 1 or (array.dtype.kind != "i" and array.size):  # Python ints beyond int64 make no "i" array
        for i, value in enumerate(values):
            check_int64(value, f"{parameter}[{i}]")
    return np.ascontiguousarray(array, dtype=np.int64)


# About 31 years: a deadline of now plus more would overflow the engine's
# clock (int64 nanoseconds).
MAX_SECONDS = 1e9


def check_seconds(value, parameter: str, *, allow_zero: bool = False) -> float:
    """A finite number of seconds, > 0 (or >= 0 with allow_zero), at most MAX_SECONDS."""
    number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if not number:
        raise ArgumentTypeError(f"{parameter} must be a number of seconds, got {short_repr(value)}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero) or value > MAX_SECONDS:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{parameter} must be a finite number of seconds {bound} and <= {MAX_SECONDS:g}, "
                         f"got {value!r}")
    return float(value)


def check_choice(value, parameter: str, choices: tuple) -> Any:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{parameter} must be one of {choices}, got {short_repr(value)}")
    return value


def check_instance(value, parameter: str, kind: type, description: str) -> Any:
    """`value` if it is a `kind` (described to the user as `description`)."""
    if not isinstance(value, kind):
        raise ArgumentTypeError(f"{parameter} must be {description}, got {type(value).__name__} "
                                f"{short_repr(value)}")
    return value


def check_tag(value, parameter: str) -> Optional[dict]:
    """A tag (kv_put) or one custom_meta entry: None or a dict whose keys are
    names; its values are checked where they are encoded."""
    if value is None:
        return None
    check_instance(value, parameter, dict, "a dict or None")
    for key in value:
        check_name(key, f"{parameter} key")
    return value


def check_list(value, parameter: str, description: str) -> list:
    """A list or tuple (not a str or a dict, whose items would be read as
    entries), as a list."""
    return list(check_instance(value, parameter, (list, tuple), description))


def positions(values, size: int, parameter: str) -> list[int]:
    """`values` as a list of positions in [0, size); ValueError naming the parameter otherwise."""
    if isinstance(values, range) and (not values or (0 <= min(values) and max(values) < size)):
        return list(values)
    at = np.asarray(values if isinstance(values, np.ndarray) else list(values))
    if at.size == 0:
        return []
    if at.ndim != 1 or at.dtype.kind not in "iu":
        raise ValueError(f"{parameter} must be a list of integer positions, got {values!r}")
    if at.min() < 0 or at.max() >= size:
        raise ValueError(f"{parameter} must lie in [0, {size}), got {at.tolist()}")
    return at.tolist()


def bounds(sizes) -> list[tuple[int, int]]:
    """(start, end) of consecutive parts of these sizes."""
    out, start = [], 0
    for size in sizes:
        out.append((start, start + size))
        start += size
    return out
