"""The checks and copies of BatchMeta's constructor arguments:
global_indexes, partition_ids, generations, field_schema, production_status
and the dicts per sample (custom_meta, _custom_backend_meta)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from numbers import Integral
from typing import Any, Optional

import numpy as np

from seqflow._checks import check_name, check_names
from seqflow._field_schema import copy_schema

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _is_text(value: Any) -> bool:
    return isinstance(value, (str, bytes))


def _is_integer(value: Any) -> bool:
    return type(value) is int or (not isinstance(value, bool) and isinstance(value, Integral))


def global_indexes_of(values: Any) -> np.ndarray:
    """A list (or 1-D integer array) of integers in int64's range, as an int64 array."""
    def refused() -> TypeError:
        return TypeError(f"global_indexes must be a list of integers, got {values!r}")

    if _is_text(values) or not isinstance(values, Iterable):
        raise refused()
    if isinstance(values, np.ndarray):
        if values.size == 0:
            return np.zeros(0, dtype=np.int64)
        if values.ndim != 1 or values.dtype.kind not in "iu":
            raise refused()
        items = values.tolist()
    else:
        items = list(values)
    if not all(type(item) is int for item in items):
        # numpy reads a list of bools only as bools (refused), a mix with integers as integers.
        if not all(isinstance(item, bool) or _is_integer(item) for item in items):
            raise refused()
        if all(isinstance(item, bool) for item in items):
            raise refused()
        items = [int(item) for item in items]
    if items and (max(items) > _INT64_MAX):
        raise ValueError(f"global_indexes has values beyond the int64 range, got {values!r}")
    if items and min(items) < _INT64_MIN:
        raise refused()
    return np.array(items, dtype=np.int64)


def partition_ids_of(values: Any, samples: int) -> list[str]:
    if isinstance(values, str):
        raise TypeError(f"partition_ids must be a list with one partition id per sample, got {values!r}")
    ids = check_names(values, "partition_ids")
    if len(ids) != samples:
        raise ValueError(f"Length mismatch: global_indexes has {samples}, partition_ids has {len(ids)}")
    return ids


def generations_of(values: Any, samples: int) -> Optional[np.ndarray]:
    """None (not known) or one integer in [0, 2**64) per sample, as a uint64 array."""
    if values is None:
        return None
    if _is_text(values) or not isinstance(values, Iterable):
        raise TypeError(f"generations must be None or a list of integers, got {values!r}")
    items = list(values)
    if len(items) != samples:
        raise ValueError(f"Length mismatch: global_indexes has {samples}, generations has {len(items)}")
    for i, item in enumerate(items):
        if not _is_integer(item) or not 0 <= int(item) < 2**64:
            raise TypeError(f"generations[{i}] must be an integer in [0, 2**64), got {item!r}")
    return np.array([int(item) for item in items], dtype=np.uint64)


def field_schema_of(field_schema: Any, samples: int) -> dict[str, dict[str, Any]]:
    """A copy of a dict of field name to dict; per_sample_shapes hold one shape per sample."""
    if field_schema is None:
        return {}
    if not isinstance(field_schema, Mapping):
        raise TypeError(f"field_schema must be a dict of field name to dict, got {type(field_schema).__name__}")
    for name in field_schema:
        check_name(name, "field_schema key")
        entry = field_schema[name]
        if not isinstance(entry, Mapping):
            raise TypeError(f"field_schema[{name!r}] must be a dict, got {type(entry).__name__}")
        shapes = entry.get("per_sample_shapes")
        if shapes is not None and len(shapes) != samples:
            raise ValueError(f"Field {name!r} per_sample_shapes length {len(shapes)} != batch_size {samples}")
    return copy_schema(field_schema)


def production_status_of(production_status: Any, samples: int,
                         schema: dict[str, Any]) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """(one int8 per sample, samples x sorted fields bools or None). A samples
    x fields matrix in field_schema order gives both."""
    if production_status is None:
        return np.zeros(samples, dtype=np.int8), None
    status = np.array(production_status, copy=True)
    names = list(schema)
    if status.ndim == 2 and status.shape == (samples, len(names)):
        matrix = status.astype(bool)
        ready = matrix.all(axis=1) if names else np.zeros(samples, dtype=bool)
        order = sorted(range(len(names)), key=lambda j: names[j])
        return ready.astype(np.int8), np.ascontiguousarray(matrix[:, order])
    if status.ndim != 1 or len(status) != samples:
        length = len(status) if status.ndim else "n/a"
        raise ValueError(f"production_status length {length} != batch_size {samples} (give one value per sample, or "
                         "a samples x fields matrix)")
    return status.astype(np.int8), None


def extra_info_of(extra_info: Any) -> dict[Any, Any]:
    if extra_info is None:
        return {}
    if not isinstance(extra_info, Mapping):
        raise TypeError(f"extra_info must be a dict, got {type(extra_info).__name__}")
    return dict(extra_info)


def dict_list(values: Any, samples: int, name: str, copy_entries: bool = True,
              empty_is_none: bool = True) -> list[dict[Any, Any]]:
    """One dict per sample (empty ones for None, and for [] unless not
    empty_is_none), each copied unless not copy_entries."""
    empty = isinstance(values, (list, tuple)) and len(values) == 0
    if values is None or (empty_is_none and empty):
        return [{} for _ in range(samples)]
    if _is_text(values) or isinstance(values, Mapping) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a list of dicts, one per sample, got {type(values).__name__}")
    items = list(values)
    if len(items) != samples:
        raise ValueError(f"{name} length {len(items)} != batch_size {samples}")
    for i, entry in enumerate(items):
        if not isinstance(entry, Mapping):
            raise TypeError(f"{name}[{i}] must be a dict, got {type(entry).__name__}")
    return [dict(entry) for entry in items] if copy_entries else items
