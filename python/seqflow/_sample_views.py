"""BatchMeta.samples: one read-only view per sample (its dicts are
MappingProxyType), reading the batch's columns and attributes."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Iterator

import numpy as np


class _SampleView:
    """One sample of a BatchMeta, read-only (dicts are MappingProxyType)."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: Any, index: int) -> None:
        self._batch, self._index = batch, index

    @property
    def global_index(self) -> int:
        return self._batch.global_indexes[self._index]

    @property
    def partition_id(self) -> str:
        return self._batch.partition_ids[self._index]

    @property
    def production_status(self) -> int:
        return int(self._batch.production_status[self._index])

    @property
    def custom_meta(self) -> MappingProxyType:
        return MappingProxyType(self._batch.custom_meta[self._index])

    @property
    def fields(self) -> MappingProxyType:
        """Per field its schema; a nested field's ``shape`` is this sample's."""
        out = {}
        for name, entry in self._batch.field_schema.items():
            own = dict(entry)
            if "per_sample_shapes" in own:
                shapes = own.pop("per_sample_shapes")
                if shapes is not None:
                    own["shape"] = shapes[self._index]
            out[name] = MappingProxyType(own)
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

    def __getitem__(self, idx: Any) -> _SampleView:
        n = self._batch.size
        integer = not isinstance(idx, (bool, np.bool_)) and isinstance(idx, (int, np.integer))
        if not integer or not -n <= idx < n:
            raise IndexError(f"sample index {idx!r} out of range for a batch of {n}")
        return _SampleView(self._batch, int(idx) + n if idx < 0 else int(idx))

    def __iter__(self) -> Iterator[_SampleView]:
        return iter([_SampleView(self._batch, i) for i in range(self._batch.size)])
