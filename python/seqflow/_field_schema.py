"""field_schema entries as the engine reports them, for data given in
Python (BatchMeta.add_fields), and the dtype names the engine reads."""

from __future__ import annotations

import numbers
from typing import Mapping, Optional

import numpy as np

# The engine's dtype names (numpy's spelling, and torch's for bfloat16).
_DTYPE_NAMES = frozenset(("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
                          "float64"))


def dtype_name(dtype) -> Optional[str]:
    """"float32" for torch.float32, np.float32, "float32" or "torch.float32";
    other spellings ("torch.float") as they are, for the engine to read."""
    if dtype is None:
        return None
    if not isinstance(dtype, str):
        try:
            dtype = str(dtype) if type(dtype).__module__ == "torch" else np.dtype(dtype).name
        except (TypeError, ValueError):
            return str(dtype)
    bare = dtype.removeprefix("torch.")
    return bare if bare in _DTYPE_NAMES else dtype


def common_shape(shapes: list[tuple]) -> tuple:
    """The shape the engine reports for samples of these shapes: -1 where they differ."""
    first = shapes[0]
    if any(len(s) != len(first) for s in shapes):
        return (-1,) * max(len(s) for s in shapes)
    return tuple(d if all(s[k] == d for s in shapes) else -1 for k, d in enumerate(first))


def _nested_entry(dtype, shapes: list[tuple]) -> dict:
    return {"dtype": dtype_name(dtype), "shape": common_shape(shapes), "is_nested": True,
            "is_non_tensor": False, "per_sample_shapes": shapes}


def _dense_entry(dtype, shape) -> dict:
    return {"dtype": dtype_name(dtype), "shape": tuple(shape), "is_nested": False, "is_non_tensor": False}


def _count_error(name: str, count, rows: int) -> ValueError:
    return ValueError(f"field {name!r} holds {count} samples, the batch {rows}")


def _field_entry(name: str, value, rows: int) -> dict:
    """The schema of one field of `rows` samples, as the engine would report it."""
    if hasattr(value, "tolist") and type(value).__name__ in ("NonTensorStack", "NonTensorData"):
        value = value.tolist()
    if type(value).__module__.startswith("torch") and hasattr(value, "is_nested"):
        samples = list(value.unbind()) if value.is_nested else None
        count = len(samples) if samples is not None else (value.shape[0] if value.dim() else 0)
        if count != rows:
            raise _count_error(name, count, rows)
        if samples is not None:
            return _nested_entry(value.dtype, [tuple(t.shape) for t in samples])
        return _dense_entry(value.dtype, value.shape[1:])
    if isinstance(value, np.ndarray) and value.dtype.kind not in "OUS":
        if value.ndim == 0 or value.shape[0] != rows:
            raise _count_error(name, value.shape[0] if value.ndim else "no", rows)
        return _dense_entry(value.dtype, value.shape[1:])
    items = list(value) if isinstance(value, (list, tuple, np.ndarray)) else None
    if items is None:
        raise ValueError(f"field {name!r} is a {type(value).__name__}; give a tensor, an array or a list")
    if len(items) != rows:
        raise _count_error(name, len(items), rows)
    if items and all(hasattr(i, "shape") and hasattr(i, "dtype") for i in items):
        return _nested_entry(items[0].dtype, [tuple(i.shape) for i in items])
    if items and all(isinstance(i, (numbers.Number, np.bool_)) and not isinstance(i, complex) for i in items):
        return _dense_entry(np.asarray(items).dtype, ())
    return {"dtype": None, "shape": None, "is_nested": False, "is_non_tensor": True}


def schema_of(data) -> tuple[int, dict]:
    """(sample count, field_schema) of a TensorDict or a dict of fields."""
    if hasattr(data, "batch_size") and hasattr(data, "items"):
        rows = int(data.batch_size[0]) if len(data.batch_size) else 0
        pairs = [(key, data.get(key)) for key in data.keys()]
    elif isinstance(data, Mapping):
        pairs = list(data.items())
        first = pairs[0][1] if pairs else ()
        rows = int(first.shape[0]) if getattr(first, "shape", None) else len(first)
    else:
        raise TypeError(f"tensor_dict must be a TensorDict or a dict of fields, got {type(data).__name__}")
    return rows, {name: _field_entry(name, value, rows) for name, value in pairs} if rows else {}
