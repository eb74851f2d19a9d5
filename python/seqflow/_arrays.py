"""User input (lists, tuples, numpy arrays of any integer dtype, torch tensors)
as the 1-D C-contiguous int64 arrays the engine's typed calls take, converted
once with numpy. Errors name the parameter, the index and the value."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, Union

import numpy as np
import numpy.typing as npt

from seqflow._checks import INT64_MAX, short_repr

__all__ = ["IntArrayLike", "Tensor", "as_int64_array"]

_INT64 = np.dtype(np.int64)  # numpy's one instance: arrays of int64 carry it


class Tensor(Protocol):
    """A torch tensor or another DLPack producer (numpy arrays are one too)."""

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...


# What the API takes as a list of integers.
IntArrayLike = Union[Sequence[Union[int, np.integer[Any]]], npt.NDArray[np.integer[Any]], Tensor]


def as_int64_array(values: Any, name: str, allow_negative: bool = False) -> np.ndarray:
    """`values` as a 1-D C-contiguous int64 array, copied only when the layout
    or dtype requires it. Refuses non-integers, NaN and (unless allowed)
    negatives. The engine names negative lengths itself: callers whose engine
    call checks them pass allow_negative=True and spare the scan."""
    array = values if type(values) is np.ndarray else _to_array(values, name)
    if array.dtype is not _INT64 or array.ndim != 1 or not array.flags.c_contiguous:
        array = _checked_int64(array, values, name)
    if not allow_negative and array.size and array.min() < 0:
        lowest = int(array.argmin())  # named at the first smallest value
        raise ValueError(f"{name}[{lowest}] = {array[lowest]} is negative; {name} must be >= 0")
    return array


def _to_array(values: Any, name: str) -> np.ndarray:
    """`values` as a numpy array; a CPU tensor (any DLPack producer) without a copy."""
    if isinstance(values, np.ndarray):
        return values
    if hasattr(values, "__dlpack__") and hasattr(values, "device"):
        if str(values.device) != "cpu":
            raise ValueError(f"{name} must live on the CPU, got a tensor on {values.device}")
        return np.from_dlpack(values.detach() if hasattr(values, "detach") else values)
    try:
        return np.asarray(values)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be a 1-D sequence of integers: {error}") from None


def _checked_int64(array: np.ndarray, values: Any, name: str) -> np.ndarray:
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {tuple(array.shape)}: {short_repr(values)}")
    kind = array.dtype.kind
    if kind == "f":
        _check_whole(array, name)
    elif kind == "u":
        if array.size and array.max() > INT64_MAX:
            raise ValueError(f"{name} has values beyond the int64 range")
    elif kind == "O":
        _check_objects(array, name)
    elif kind != "i":
        raise ValueError(f"{name} must hold integers, got dtype {array.dtype}")
    return np.ascontiguousarray(array, dtype=np.int64)


def _check_whole(array: np.ndarray, name: str) -> None:
    """Refuses floats that are not whole (NaN, inf, 1.5) and those beyond int64."""
    floats = np.asarray(array, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        broken = np.flatnonzero(~np.isfinite(floats) | (np.floor(floats) != floats))
    if broken.size:
        index = int(broken[0])
        raise ValueError(f"{name}[{index}] = {float(floats[index])!r} is not an integer")
    if floats.size and np.abs(floats).max() >= 2.0**63:
        raise ValueError(f"{name} has values beyond the int64 range")


def _check_objects(array: np.ndarray, name: str) -> None:
    for index, value in enumerate(array):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{name}[{index}] = {value!r} is not an integer")
        if not -(2**63) <= int(value) <= INT64_MAX:
            raise ValueError(f"{name}[{index}] = {value} is beyond the int64 range")
