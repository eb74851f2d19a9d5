"""Integer and workload arguments as the balancing and packing calls take
them: an int or a numpy integer, never a bool or a float (which would be
truncated); a workload by name or as a Workload. Errors name the parameter
and the value (a ValueError, as the engine's own checks raise)."""

from __future__ import annotations

import atexit
from typing import Any, Optional, Union

import numpy as np

from seqflow._checks import INT64_MAX, INT64_MIN
from seqflow._seqflow.balance import OnlineWorkload, Workload

__all__ = ["WorkloadLike", "int64_argument", "optional_int64_argument", "workload_argument"]

# A Workload, its name ("tokens", "verl", "quadratic(a,b)"), ("quadratic", a, b) or an OnlineWorkload.
WorkloadLike = Union[str, tuple[str, int, int], Workload, OnlineWorkload]

_WORKLOADS = "'tokens', 'verl', 'quadratic(a,b)', ('quadratic', a, b), a Workload or an OnlineWorkload"
UINT64_MAX = 2**64 - 1
# Workloads by name, parsed once (a Workload is immutable): most calls name the default, "tokens".
_PARSED: dict[str, Workload] = {}
_MAX_PARSED = 64
# Emptied before the interpreter tears modules down: a Workload still cached when nanobind's
# module goes (its order among modules varies, torch imported or not) is reported as leaked.
atexit.register(_PARSED.clear)


def int64_argument(value: Any, name: str, low: int = INT64_MIN, high: int = INT64_MAX) -> int:
    """`value` if it is an integer in low..high (by default int64's range)."""
    if type(value) is int and low <= value <= high:
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    number = int(value)
    if not low <= number <= high:
        bounds = "the int64 range" if (low, high) == (INT64_MIN, INT64_MAX) else f"{low}..{high}"
        raise ValueError(f"{name} = {number} is outside {bounds}")
    return number


def optional_int64_argument(value: Any, name: str) -> Optional[int]:
    return None if value is None else int64_argument(value, name)


def workload_argument(value: Any) -> Workload:
    """The Workload `value` names; an OnlineWorkload counts as its current model."""
    if isinstance(value, str):  # first: isinstance of a bound class costs more
        workload = _PARSED.get(value)
        if workload is None:
            workload = Workload.parse(value)
            if len(_PARSED) < _MAX_PARSED:
                _PARSED[value] = workload
        return workload
    if isinstance(value, Workload):
        return value
    if isinstance(value, OnlineWorkload):
        return value.workload
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[0], str) and value[0] == "quadratic":
        try:
            a, b = int64_argument(value[1], "a"), int64_argument(value[2], "b")
        except ValueError as error:
            raise ValueError(f"workload = {value!r}: {error}; workload must be {_WORKLOADS}") from None
        return Workload.quadratic(a, b)
    raise ValueError(f"workload must be {_WORKLOADS}, got {value!r}")
