"""Turning user input (lists, numpy arrays, torch tensors) into int64 arrays."""

from __future__ import annotations

import numpy as np

from seqflow import _seqflow
from seqflow._checks import short_repr


def _to_numpy(values, name: str) -> np.ndarray:
    if isinstance(values, np.ndarray):
        return values
    if hasattr(values, "__dlpack__") and hasattr(values, "device"):
        # torch tensors (and other DLPack producers) on the CPU: no copy.
        if str(values.device) != "cpu":
            raise ValueError(f"{name} must live on the CPU, got a tensor on {values.device}")
        return np.from_dlpack(values.detach() if hasattr(values, "detach") else values)
    try:
        return np.asarray(values)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be a 1-D sequence of integers: {error}") from None


def as_int64_array(values, name: str, *, allow_negative: bool = False) -> np.ndarray:
    """A 1-D contiguous int64 view of `values`; copies only when the layout or
    dtype requires it. Rejects non-integers, NaN and (unless allowed) negatives,
    naming the parameter, the index and the value."""
    array = _seqflow._exact_int64(values) if isinstance(values, (list, tuple)) else None
    if array is None:
        array = _to_numpy(values, name)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {tuple(array.shape)}: {short_repr(values)}")
    kind = array.dtype.kind
    if kind == "f":
        bad = ~np.isfinite(array) | (array != np.round(array))
        if bad.any():
            index = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{name}[{index}] = {array[index].item()!r} is not an integer")
        if array.size and np.abs(array).max() >= 2.0**63:
            raise ValueError(f"{name} has values beyond the int64 range")
    elif kind == "u":
        if array.size and array.max() > np.iinfo(np.int64).max:
            raise ValueError(f"{name} has values beyond the int64 range")
    elif kind == "O":
        for index, value in enumerate(array):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
                raise ValueError(f"{name}[{index}] = {value!r} is not an integer")
            if not -(2**63) <= int(value) < 2**63:
                raise ValueError(f"{name}[{index}] = {value} is beyond the int64 range")
    elif kind != "i" and not (kind == "f" and array.size == 0):
        raise ValueError(f"{name} must hold integers, got dtype {array.dtype}")
    result = np.ascontiguousarray(array, dtype=np.int64)
    if not allow_negative and result.size and result.min() < 0:
        index = int(np.argmin(result))
        raise ValueError(f"{name}[{index}] = {int(result[index])} is negative; {name} must be >= 0")
    return result
