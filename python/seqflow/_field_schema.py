"""BatchMeta's field_schema: ``{field: {dtype, shape, is_nested, is_non_tensor,
per_sample_shapes?}}``, dtypes as the caller gave them. Entries as the engine
reports them, for data given in Python (add_fields), the engine's view of an
entry, copies, and the schema of joined batches (the shape rule is the
engine's, ``_seqflow.common_shape``)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from numbers import Number
from typing import Any, Optional

import numpy as np

from seqflow import _seqflow

_DTYPE_NAMES = frozenset(_seqflow.convert.DTYPES)


def dtype_name(dtype: Any) -> Any:
    """"float32" for torch.float32, np.float32, "float32" or "torch.float32";
    other spellings ("torch.float") as they are, for the engine to read."""
    if dtype is None:
        return None
    text = dtype
    if not isinstance(dtype, str):
        try:
            text = str(dtype) if type(dtype).__module__ == "torch" else np.dtype(dtype).name
        except (TypeError, ValueError):
            return str(dtype)
    bare = text[6:] if text.startswith("torch.") else text
    return bare if bare in _DTYPE_NAMES else text


def from_engine(entry: Any) -> dict[str, Any]:
    """The entry of a NativeFieldSchema; an object field has no dtype or shape
    (None, as in TransferQueue): how the engine stores its objects is private."""
    if entry.is_object:
        return {"dtype": None, "shape": None, "is_nested": entry.is_nested, "is_non_tensor": True}
    return {"dtype": entry.dtype, "shape": tuple(entry.shape), "is_nested": entry.is_nested, "is_non_tensor": False}


def to_engine(field: str, entry: Any) -> Any:
    """The entry as the engine reads it (the dtype by name); ValueError for one
    the engine cannot read."""
    if not isinstance(entry, Mapping):
        raise ValueError(f'field_schema["{field}"] must be a dict')
    dtype = dtype_name(entry.get("dtype"))
    shape = entry.get("shape")
    is_object = bool(entry.get("is_non_tensor", False))
    return _seqflow.NativeFieldSchema("uint8" if dtype is None else str(dtype), [] if shape is None else list(shape),
                                      bool(entry.get("is_nested", False)), is_object)


def _copied_value(key: Any, value: Any) -> Any:
    # A dtype object (torch.float32) is kept; a shape tuple of ints is immutable already.
    if key == "dtype" or value is None or type(value) in (bool, int, str, float):
        return value
    if type(value) is tuple and all(type(d) is int for d in value):
        return value
    return copy.deepcopy(value)


def copy_schema(schema: Mapping[str, Any], at: Optional[list[int]] = None) -> dict[str, dict[str, Any]]:
    """A copy that shares nothing mutable (dtypes are kept); with `at`, the
    per_sample_shapes of the samples at those positions only."""
    out = {}
    for name, given in schema.items():
        copied = {key: _copied_value(key, value) for key, value in given.items()}
        shapes = copied.get("per_sample_shapes")
        if at is not None and shapes is not None:
            copied["per_sample_shapes"] = [shapes[i] for i in at]
        out[name] = copied
    return out


def concat_schema(parts: list[Any]) -> dict[str, dict[str, Any]]:
    """The first part's schema; a field nested in any part is nested, with
    the engine's common shape of its parts' (or samples') shapes, and
    per_sample_shapes are joined when any part has them."""
    first = parts[0].field_schema
    out = {}
    for name in first:
        entries = [part.field_schema.get(name, {}) for part in parts]
        merged = copy_schema({name: first[name]})[name]
        nested = any(entry.get("is_nested", False) for entry in entries)
        merged["is_nested"] = nested
        shapes = [entry.get("shape") for entry in entries]
        if any(entry.get("per_sample_shapes") is not None for entry in entries):
            shapes = []
            for part, entry in zip(parts, entries):
                own = entry.get("per_sample_shapes")
                shapes.extend([entry.get("shape")] * part.size if own is None else own)
            merged["per_sample_shapes"] = shapes
        if nested:
            tuples = all(type(shape) is tuple for shape in shapes)
            merged["shape"] = tuple(_seqflow.common_shape(shapes)) if tuples else None
        out[name] = merged
    return out


def _entry(dtype: Any, shape: Any, nested: bool, non_tensor: bool) -> dict[str, Any]:
    return {"dtype": dtype_name(dtype), "shape": shape, "is_nested": nested, "is_non_tensor": non_tensor}


def _nested_entry(dtype: Any, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
    out = _entry(dtype, tuple(_seqflow.common_shape(shapes)), True, False)
    out["per_sample_shapes"] = shapes
    return out


def _wrong_count(name: Any, count: Any, rows: int) -> ValueError:
    return ValueError(f"field {name!r} holds {count} samples, the batch {rows}")


def _field_entry(name: Any, value: Any, rows: int) -> dict[str, Any]:
    """The schema of one field of `rows` samples, as the engine would report it."""
    if type(value).__name__ in ("NonTensorStack", "NonTensorData") and hasattr(value, "tolist"):
        value = value.tolist()
    if type(value).__module__.startswith("torch") and hasattr(value, "is_nested"):
        samples = list(value.unbind()) if value.is_nested else None
        count = len(samples) if samples is not None else value.shape[0] if value.dim() else 0
        if count != rows:
            raise _wrong_count(name, count, rows)
        if samples is not None:
            return _nested_entry(value.dtype, [tuple(sample.shape) for sample in samples])
        return _entry(value.dtype, tuple(value.shape[1:]), False, False)
    is_array = isinstance(value, np.ndarray)
    if is_array and value.dtype.kind not in "OUS":
        if value.ndim == 0 or value.shape[0] != rows:
            raise _wrong_count(name, "no" if value.ndim == 0 else value.shape[0], rows)
        return _entry(value.dtype, tuple(value.shape[1:]), False, False)
    if not is_array and not isinstance(value, (list, tuple)):
        raise ValueError(f"field {name!r} is a {type(value).__name__}; give a tensor, an array or a list")
    items = list(value)
    if len(items) != rows:
        raise _wrong_count(name, len(items), rows)
    if items and all(hasattr(item, "shape") and hasattr(item, "dtype") for item in items):
        return _nested_entry(items[0].dtype, [tuple(item.shape) for item in items])
    if items and all(not isinstance(item, complex) and isinstance(item, (Number, np.bool_)) for item in items):
        return _entry(np.asarray(items).dtype, (), False, False)
    return _entry(None, None, False, True)


def schema_of(data: Any) -> tuple[int, dict[str, dict[str, Any]]]:
    """(sample count, field_schema) of a TensorDict or a dict of fields (add_fields)."""
    if hasattr(data, "batch_size") and hasattr(data, "items"):
        rows = int(data.batch_size[0]) if len(data.batch_size) else 0
        fields = [(key, data.get(key)) for key in data.keys()]
    elif isinstance(data, Mapping):
        fields = list(data.items())
        first = fields[0][1] if fields else ()
        shape = getattr(first, "shape", None)
        rows = int(shape[0]) if shape else len(first)
    else:
        raise TypeError(f"tensor_dict must be a TensorDict or a dict of fields, got {type(data).__name__}")
    return rows, {name: _field_entry(name, value, rows) for name, value in fields} if rows else {}
