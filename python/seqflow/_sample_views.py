"""BatchMeta.samples: one read-only view per sample (dicts are MappingProxyType)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import numpy as np


class _SampleView:
    """One sample of a BatchMeta, read-only (dicts are MappingProxyType)."""

    __slots__ = ("_batch", "_idx")

    def __init__(self, batch: Any, idx: int) -> None:
        self._batch = batch
        self._idx = idx

    @property
    def global_index(self) -> int:
        return self._batch.global_indexes[self._idx]

    @property
    def partition_id(self) -> str:
        return self._batch.partition_ids[self._idx]

    @property
    def production_status(self) -> int:
        return int(self._batch.production_status[self._idx])

    @property
    def custom_meta(self) -> MappingProxyType:
        return MappingProxyType(self._batch.custom_meta[self._idx])

    @property
    def fields(self) -> MappingProxyType:
        """Per field its schema; a nested field's ``shape`` is this sample's."""
        out = {}
        for name, entry in self._batch.field_schema.items():
            entry = dict(entry)
            shapes = entry.pop("per_sample_shapes", None)
            if shapes is not None:
                entry["shape"] = shapes[self._idx]
            out[name] = MappingProxyType(entry)
        return MappingProxyType(out)

    def __repr__(self) -> str:
        return (f"_SampleView(global_index={self.global_index}, partition_id={self.partition_id!r}, "
                f"production_status={self.production_status}, fields={list(self._batch.field_schema)})")


class _SampleViewList:
    """BatchMeta.samples: indexable, sized and iterable, one view per sample."""

    __slots__ = ("_batch",)

    def __init__(self, batch: Any) -> None:
        self._batch = batch

    def __len__(self) -> int:
        return self._batch.size

    def __getitem__(self, idx: int) -> _SampleView:
        n = self._batch.size
        if isinstance(idx, bool) or not isinstance(idx, (int, np.integer)) or not -n <= idx < n:
            raise IndexError(f"sample index {idx!r} out of range for a batch of {n}")
        return _SampleView(self._batch, int(idx) % n)

    def __iter__(self):
        return (_SampleView(self._batch, i) for i in range(len(self)))
