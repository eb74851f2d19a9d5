"""BatchMeta: which samples a batch holds and what is known about them.

Columnar, as in TransferQueue: ``global_indexes`` (int64 array),
``partition_ids`` (one per sample), ``field_schema``
(``{field: {dtype, shape, is_nested, is_non_tensor}}``), ``production_status``
(bool array, samples x fields in ``field_schema`` order), ``custom_meta`` (one
dict per sample) and ``extra_info`` (a dict).

``chunk`` and the micro-batch split of the data (seqflow.streaming) use one
rule, ``chunk_sizes``: n parts whose sizes differ by at most one, larger parts
first. TransferQueue split data [3, 3, 1] but metadata [3, 2, 2]; here data
and metadata always agree.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence

import numpy as np

__all__ = ["BatchMeta", "KVBatchMeta", "chunk_sizes"]


def chunk_sizes(total: int, parts: int) -> list[int]:
    """Sizes of `parts` consecutive chunks of `total` items: as equal as
    possible, the larger ones first (7 into 3 -> [3, 2, 2])."""
    if isinstance(parts, bool) or not isinstance(parts, (int, np.integer)) or parts < 1:
        raise ValueError(f"parts must be an integer >= 1, got {parts!r}")
    if total < 0:
        raise ValueError(f"total must be >= 0, got {total}")
    base, extra = divmod(int(total), int(parts))
    return [base + 1 if i < extra else base for i in range(int(parts))]


def _select_encoded(encoded: tuple[bytes, np.ndarray], positions: list[int]) -> tuple[bytes, np.ndarray]:
    """The encoded custom_meta (MessagePack bytes, uint32 offsets) of the
    samples at `positions` (in range): their bytes cut out and joined, nothing
    decoded, so that splitting a fetched batch costs no dict per sample."""
    data, offsets = encoded
    first = positions[0] if positions else 0
    if first >= 0 and positions == list(range(first, first + len(positions))):  # a run, as chunk and split take
        begin, end = int(offsets[first]), int(offsets[first + len(positions)])
        return data[begin:end], offsets[first:first + len(positions) + 1] - np.uint32(begin)
    at = np.asarray(positions, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    starts = offsets[:-1][at]
    lengths = offsets[1:][at] - starts
    bounds = np.zeros(len(at) + 1, dtype=np.int64)
    np.cumsum(lengths, out=bounds[1:])
    # Byte j of the result is byte j + (start - bound) of the source, per sample.
    source = np.repeat(starts - bounds[:-1], lengths) + np.arange(bounds[-1])
    return np.frombuffer(data, dtype=np.uint8)[source].tobytes(), bounds.astype(np.uint32)


def _bounds(sizes: Sequence[int]) -> list[tuple[int, int]]:
    out, start = [], 0
    for size in sizes:
        out.append((start, start + size))
        start += size
    return out


class BatchMeta:
    """Metadata of a batch of samples (see the module docstring)."""

    # custom_meta arrives from the engine encoded and is decoded on first use:
    # a fetch of hundreds of samples should not pay for dicts nobody reads.
    __slots__ = ("global_indexes", "partition_ids", "field_schema", "production_status", "_custom_meta",
                 "_encoded_meta", "extra_info")
    _STATE = ("global_indexes", "partition_ids", "field_schema", "production_status", "custom_meta",
              "extra_info")

    def __init__(self, global_indexes=(), partition_ids=(), field_schema=None, production_status=None,
                 custom_meta=None, extra_info=None):
        self.global_indexes = np.ascontiguousarray(np.asarray(global_indexes, dtype=np.int64).reshape(-1))
        n = len(self.global_indexes)
        self.partition_ids = list(partition_ids)
        if len(self.partition_ids) != n:
            raise ValueError(f"{len(self.partition_ids)} partition ids for {n} samples")
        self.field_schema = dict(field_schema or {})
        if production_status is None:
            production_status = np.zeros((n, len(self.field_schema)), dtype=bool)
        self.production_status = np.asarray(production_status, dtype=bool).reshape(n, len(self.field_schema))
        self._encoded_meta = None
        self._custom_meta = [dict(m) for m in custom_meta] if custom_meta is not None else [{} for _ in range(n)]
        if len(self._custom_meta) != n:
            raise ValueError(f"{len(self.custom_meta)} custom_meta entries for {n} samples")
        self.extra_info = dict(extra_info or {})

    # ---- construction ---------------------------------------------------
    @classmethod
    def empty(cls, extra_info: dict | None = None) -> "BatchMeta":
        """A batch of no samples."""
        return cls(extra_info=extra_info)

    @classmethod
    def _of(cls, global_indexes, partition_ids, field_schema, production_status, custom_meta, encoded_meta,
            extra_info) -> "BatchMeta":
        """A batch of parts that agree and belong to it alone, unchecked; one of
        custom_meta (dicts) and encoded_meta (bytes, uint32 offsets) is set."""
        meta = cls.__new__(cls)
        meta.global_indexes = global_indexes
        meta.partition_ids = partition_ids
        meta.field_schema = field_schema
        meta.production_status = production_status
        meta._custom_meta = custom_meta
        meta._encoded_meta = encoded_meta
        meta.extra_info = extra_info
        return meta

    @classmethod
    def _from_native(cls, native: dict) -> "BatchMeta":
        return cls._of(native["global_indexes"], native["partition_ids"], native["field_schema"],
                       native["production_status"], None, native["custom_meta_encoded"], native["extra_info"])

    def _to_native(self) -> dict:
        return {
            "global_indexes": self.global_indexes,
            "partition_ids": self.partition_ids,
            "field_schema": self.field_schema,
            "production_status": np.ascontiguousarray(self.production_status, dtype=bool),
            "custom_meta": self._custom_meta,
            "custom_meta_encoded": self._encoded_meta if self._custom_meta is None else None,
            "extra_info": self.extra_info,
        }

    @property
    def custom_meta(self) -> list[dict]:
        """One dict per sample."""
        if self._custom_meta is None:
            from seqflow import _seqflow

            self._custom_meta = _seqflow.client.decode_custom_meta(*self._encoded_meta)
            self._encoded_meta = None
        return self._custom_meta

    @custom_meta.setter
    def custom_meta(self, value: Sequence[dict]) -> None:
        value = [dict(m) for m in value]
        if len(value) != self.size:
            raise ValueError(f"{len(value)} custom_meta entries for {self.size} samples")
        self._custom_meta, self._encoded_meta = value, None

    def _changed_custom_meta(self) -> Optional[list[dict]]:
        """custom_meta when a caller may have changed it since the engine sent
        it (it was decoded), else None."""
        return self._custom_meta

    # ---- queries ----------------------------------------------------------
    @property
    def size(self) -> int:
        """Number of samples."""
        return len(self.global_indexes)

    def __len__(self) -> int:
        return self.size

    @property
    def field_names(self) -> list[str]:
        return list(self.field_schema)

    @property
    def is_ready(self) -> bool:
        """Every field of every sample produced."""
        return bool(self.production_status.all())

    def is_empty(self) -> bool:
        return self.size == 0

    def get_all_custom_meta(self) -> list[dict]:
        return self.custom_meta

    def update_custom_meta(self, custom_meta: Sequence[dict]) -> None:
        """Merges one dict per sample into custom_meta (key by key); the
        controller learns it at the next put or set_custom_meta."""
        if len(custom_meta) != self.size:
            raise ValueError(f"custom_meta holds {len(custom_meta)} entries for {self.size} samples")
        for i, entry in enumerate(custom_meta):
            if not isinstance(entry, dict):
                raise ValueError(f"custom_meta[{i}] must be a dict, got {type(entry).__name__}")
            self.custom_meta[i].update(entry)

    # ---- selections -------------------------------------------------------
    def select_samples(self, positions: Iterable[int]) -> "BatchMeta":
        """The samples at these positions (not global indexes), in this order."""
        at = np.asarray(list(positions) if not isinstance(positions, np.ndarray) else positions, dtype=np.int64)
        if at.size and (at.min() < -self.size or at.max() >= self.size):
            raise IndexError(f"positions out of range for a batch of {self.size} samples")
        at = at.reshape(-1)
        positions = at.tolist()
        return BatchMeta._of(
            self.global_indexes[at],
            [self.partition_ids[i] for i in positions],
            dict(self.field_schema),
            np.asarray(self.production_status, dtype=bool)[at].reshape(len(positions), len(self.field_schema)),
            None if self._custom_meta is None else [dict(self._custom_meta[i]) for i in positions],
            None if self._custom_meta is not None else _select_encoded(self._encoded_meta, positions),
            copy.deepcopy(self.extra_info),
        )

    def select_fields(self, fields: Iterable[str]) -> "BatchMeta":
        """The same samples with only these fields; an unknown field raises KeyError."""
        fields = [fields] if isinstance(fields, str) else list(fields)
        names = self.field_names
        missing = [f for f in fields if f not in self.field_schema]
        if missing:
            raise KeyError(f"fields {missing} are not in this batch; it has {names}")
        columns = [names.index(f) for f in fields]
        return BatchMeta._of(
            self.global_indexes.copy(),
            list(self.partition_ids),
            {f: self.field_schema[f] for f in fields},
            np.asarray(self.production_status, dtype=bool)[:, columns],
            None if self._custom_meta is None else [dict(m) for m in self._custom_meta],
            self._encoded_meta,
            copy.deepcopy(self.extra_info),
        )

    def chunk(self, chunks: int) -> list["BatchMeta"]:
        """`chunks` consecutive parts with sizes chunk_sizes(size, chunks)."""
        return [self.select_samples(range(a, b)) for a, b in _bounds(chunk_sizes(self.size, chunks))]

    def split(self, sizes: Sequence[int]) -> list["BatchMeta"]:
        """Consecutive parts of the given sizes (they must add up to size)."""
        if sum(sizes) != self.size:
            raise ValueError(f"sizes {list(sizes)} add up to {sum(sizes)}, not {self.size}")
        return [self.select_samples(range(a, b)) for a, b in _bounds(sizes)]

    def chunk_by_partition(self) -> list["BatchMeta"]:
        """One part per partition, in order of first appearance."""
        order: dict[str, list[int]] = {}
        for i, p in enumerate(self.partition_ids):
            order.setdefault(p, []).append(i)
        return [self.select_samples(at) for at in order.values()]

    def reorder(self, order: Sequence[int]) -> "BatchMeta":
        """Puts the samples in the order of these positions (a permutation),
        in place; returns self."""
        at = np.asarray(order, dtype=np.int64)
        if sorted(at.tolist()) != list(range(self.size)):
            raise ValueError(f"reorder needs a permutation of 0..{self.size - 1}, got {list(order)}")
        other = self.select_samples(at)
        self.global_indexes = other.global_indexes
        self.partition_ids = other.partition_ids
        self.production_status = other.production_status
        self._custom_meta, self._encoded_meta = other._custom_meta, other._encoded_meta
        return self

    # ---- combinations -----------------------------------------------------
    @staticmethod
    def concat(metas: Sequence["BatchMeta"]) -> "BatchMeta":
        """The samples of all batches, in order; every batch must have the same fields."""
        metas = [m for m in metas if m is not None]
        if not metas:
            return BatchMeta.empty()
        fields = metas[0].field_names
        for m in metas[1:]:
            if m.field_names != fields and m.size:
                raise ValueError(f"cannot concat batches with fields {fields} and {m.field_names}")
        schema = dict(metas[0].field_schema)
        extra: dict[str, Any] = {}
        for m in metas:
            extra.update(m.extra_info)
        return BatchMeta(
            np.concatenate([m.global_indexes for m in metas]),
            [p for m in metas for p in m.partition_ids],
            schema,
            np.concatenate([m.production_status.reshape(m.size, len(fields)) for m in metas]),
            [dict(c) for m in metas for c in m.custom_meta],
            extra,
        )

    def union(self, other: "BatchMeta") -> "BatchMeta":
        """The same samples with the fields of both (other's schema wins on a
        shared field; a field is produced when either says so)."""
        if not np.array_equal(self.global_indexes, other.global_indexes):
            raise ValueError("union needs the same samples in the same order")
        schema = dict(self.field_schema)
        schema.update(other.field_schema)
        names = list(schema)
        status = np.zeros((self.size, len(names)), dtype=bool)
        for source in (self, other):
            own = source.field_names
            for j, name in enumerate(names):
                if name in own:
                    status[:, j] |= source.production_status[:, own.index(name)]
        custom = [dict(a, **b) for a, b in zip(self.custom_meta, other.custom_meta)]
        return BatchMeta(self.global_indexes.copy(), self.partition_ids, schema, status, custom,
                         dict(self.extra_info, **other.extra_info))

    # ---- misc -------------------------------------------------------------
    def __eq__(self, other) -> bool:
        if not isinstance(other, BatchMeta):
            return NotImplemented
        return (np.array_equal(self.global_indexes, other.global_indexes)
                and self.partition_ids == other.partition_ids and self.field_schema == other.field_schema
                and np.array_equal(self.production_status, other.production_status)
                and self.custom_meta == other.custom_meta and self.extra_info == other.extra_info)

    def __getstate__(self):
        return {name: getattr(self, name) for name in self._STATE}

    def __setstate__(self, state):
        self._encoded_meta = None
        for name, value in state.items():
            setattr(self, "_custom_meta" if name == "custom_meta" else name, value)

    def __repr__(self) -> str:
        shown = self.global_indexes[:8].tolist()
        more = "..." if self.size > 8 else ""
        return (f"BatchMeta(size={self.size}, global_indexes={shown}{more}, fields={self.field_names}, "
                f"is_ready={self.is_ready})")


@dataclass
class KVBatchMeta:
    """What a kv put returns: the keys, their tags and the fields they hold."""

    keys: list[str]
    tags: list[Any]
    partition_id: str
    fields: list[str]
    extra_info: dict = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.keys)
