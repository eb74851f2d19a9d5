"""extra_info of joined batches (BatchMeta.concat, KVBatchMeta.concat): the
union of the parts' dicts, whose values may be any objects (arrays and tensors
compare element by element)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

_log = logging.getLogger("seqflow.batch_meta")


def _values_equal(a: Any, b: Any) -> bool:
    """Same type and equal, never an ambiguous truth value."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return bool(np.array_equal(a, b))
    if type(a).__module__.startswith("torch") and hasattr(a, "equal"):
        return bool(a.equal(b))
    try:
        return bool(a == b)
    except (TypeError, ValueError, RuntimeError):
        return False


def merged_extra_info(infos: list[dict[Any, Any]], owner: str) -> dict[Any, Any]:
    """The union of the parts' extra_info dicts (`owner`.concat names the
    join in messages); a key with different values in two parts raises
    ValueError."""
    if any(set(info) != set(infos[0]) for info in infos[1:]):
        _log.warning("%s.concat: extra_info key sets differ across chunks; taking the union of keys", owner)
    merged: dict[Any, Any] = {}
    for i, info in enumerate(infos):
        for key, value in info.items():
            if key not in merged:
                merged[key] = value
            elif not _values_equal(merged[key], value):
                raise ValueError(f"{owner}.concat: extra_info key {key!r} has conflicting values across chunks and "
                                 f"cannot be merged: {merged[key]!r} and, in chunk[{i}], {value!r}")
    return merged
