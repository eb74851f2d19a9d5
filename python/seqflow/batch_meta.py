"""BatchMeta: which samples a batch holds and what is known about them.

TransferQueue 0.1.11's constructor, attributes and methods over seqflow's C++
BatchMeta (include/seqflow/batch_meta.h), which holds the columns and does
the cutting and joining: ``global_indexes``, ``partition_ids``,
``generations`` (per sample, the generation the controller gave its index; a
stale or foreign batch is refused with ``StaleSampleError``; None when built
by hand), which fields of each sample are produced, and custom_meta as the
engine's MessagePack, decoded on first read. This subclass keeps what holds
Python objects: ``field_schema`` (``{field: {dtype, shape, is_nested,
is_non_tensor, per_sample_shapes?}}``, dtypes as the caller gave them),
``production_status`` (int8 per sample; 1 counts as every field produced),
``extra_info``, custom_meta once decoded (then it is the truth) and
TransferQueue's ``_custom_backend_meta``. ``transfer_queue.metadata.BatchMeta``
is this class. ``chunk`` and the data's micro-batch split share one rule,
``chunk_sizes``.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from seqflow import _seqflow
from seqflow._checks import bounds, positions
from seqflow.kv_batch_meta import KVBatchMeta

__all__ = ["BatchMeta", "KVBatchMeta", "chunk_sizes"]

logger = logging.getLogger(__name__)
chunk_sizes = _seqflow.chunk_sizes
_Native = _seqflow.BatchMeta
_arguments = _seqflow.batch_meta_arguments
_dict_list = _arguments.dict_list
_copy_schema, _concat_schema = _seqflow.field_schema.copy_schema, _seqflow.field_schema.concat_schema
_dtype_name, _deep_copy = _seqflow.field_schema.dtype_name, _seqflow.deep_copy


class BatchMeta(_Native):
    """Metadata of a batch of samples (see the module docstring)."""

    # _custom_meta: custom_meta decoded (the truth then), or None while the
    # C++ bytes are. _backend_meta: None while every entry is empty.
    __slots__ = ("field_schema", "production_status", "extra_info", "_custom_meta", "_backend_meta")

    def __init__(self, global_indexes: Iterable[int] = (), partition_ids: Iterable[str] = (),
                 field_schema: Optional[Mapping[str, Mapping]] = None, production_status=None,
                 extra_info: Optional[Mapping[str, Any]] = None, custom_meta: Optional[Sequence[dict]] = None,
                 _custom_backend_meta: Optional[Sequence[dict]] = None,
                 generations: Optional[Iterable[int]] = None) -> None:
        (indexes, partition_ids, generations, schema, status, matrix, extra_info, custom_meta,
         backend) = _arguments.constructor_parts(global_indexes, partition_ids, field_schema, production_status,
                                                 extra_info, custom_meta, _custom_backend_meta, generations)
        _Native.__init__(self, indexes, partition_ids, generations, sorted(schema), matrix, None)
        self._set(schema, status, extra_info, custom_meta, backend)

    def _set(self, schema, status, extra_info, custom_meta, backend_meta) -> "BatchMeta":
        self.field_schema, self.production_status, self.extra_info = schema, status, extra_info
        self._custom_meta, self._backend_meta = custom_meta, backend_meta
        return self

    @classmethod
    def empty(cls, extra_info: Optional[Mapping[str, Any]] = None) -> "BatchMeta":
        """A batch of no samples."""
        return cls(extra_info=extra_info)

    @classmethod
    def _of(cls, native: _Native, schema, status, extra_info, custom_meta=None, backend_meta=None) -> "BatchMeta":
        """Takes over `native`'s columns, with these Python ones (owned, unchecked)."""
        meta = cls.__new__(cls)
        _Native.__init__(meta, native)
        return meta._set(schema, status, extra_info, custom_meta, backend_meta)

    @classmethod
    def _from_native(cls, native: _Native, extra_info: Optional[Mapping[str, Any]] = None) -> "BatchMeta":
        """The engine's batch; extra_info (copied) in place of none."""
        return cls._of(native, native._schema_dict(), native._ready(), dict(extra_info or {}))

    def _to_native(self, custom_meta: bool = True) -> _Native:
        """The C++ batch with the engine's view of field_schema (dtype names)
        and the per-field bits; with custom_meta, also the decoded one."""
        names = self.field_names
        schema = {name: dict(self.field_schema[name], dtype=_dtype_name(self.field_schema[name].get("dtype")))
                  for name in names}
        return self._with_fields(schema, self._field_produced(names), self._custom_meta if custom_meta else None)

    def _field_produced(self, names: Sequence[str]) -> np.ndarray:
        """(size, len(names)) bools: sample i has field names[j]: it is in
        field_schema and the sample's production_status is 1 or the engine said so."""
        names = list(names)
        ready = np.asarray(self.production_status).reshape(-1) == 1
        known = np.array([name in self.field_schema for name in names], dtype=bool)
        return (self._field_status(names) | ready[:, None]) & known[None, :]

    def _produced_fields(self) -> list[str]:
        """The fields every sample has."""
        names = self.field_names
        return [name for name, done in zip(names, self._field_produced(names).all(axis=0)) if done]

    # ---- custom_meta, _custom_backend_meta, extra_info -------------------------
    @property
    def custom_meta(self) -> list[dict]:
        """One dict per sample."""
        if self._custom_meta is None:
            self._custom_meta = self._decode_custom_meta()
        return self._custom_meta

    @custom_meta.setter
    def custom_meta(self, value: Sequence[dict]) -> None:
        self._custom_meta = _dict_list(value, self.size, "custom_meta")

    def _changed_custom_meta(self) -> Optional[list[dict]]:
        """custom_meta when a caller may have changed it (it was decoded), else None."""
        return self._custom_meta

    def get_all_custom_meta(self) -> list[dict]:
        """A deep copy of custom_meta (an encoded batch decodes afresh and stays encoded)."""
        return self._decode_custom_meta() if self._custom_meta is None else _deep_copy(self._custom_meta)

    def update_custom_meta(self, custom_meta: Optional[Sequence[dict]]) -> None:
        """Merges one dict per sample into custom_meta (key by key); the
        controller learns it at the next put or set_custom_meta."""
        if custom_meta is not None:
            entries = _dict_list(custom_meta, self.size, "custom_meta", copy_entries=False, empty_is_none=False)
            for mine, entry in zip(self.custom_meta, entries):
                mine.update(entry)

    def clear_custom_meta(self) -> None:
        self._custom_meta = [{} for _ in range(self.size)]

    @property
    def _custom_backend_meta(self) -> list[dict]:
        """Per sample, storage-backend metadata (TransferQueue's; seqflow's storage needs none)."""
        if self._backend_meta is None:
            self._backend_meta = [{} for _ in range(self.size)]
        return self._backend_meta

    @_custom_backend_meta.setter
    def _custom_backend_meta(self, value: Sequence[dict]) -> None:
        self._backend_meta = _dict_list(value, self.size, "_custom_backend_meta")

    def get_extra_info(self, key: str, default: Any = None) -> Any:
        return self.extra_info.get(key, default)

    def set_extra_info(self, key: str, value: Any) -> None:
        self.extra_info[key] = value

    def get_all_extra_info(self) -> dict[str, Any]:
        """A deep copy of extra_info."""
        return _deep_copy(self.extra_info)

    def update_extra_info(self, info_dict: Mapping[str, Any]) -> None:
        self.extra_info.update(info_dict)

    def remove_extra_info(self, key: str) -> Any:
        """Removes the key; its value, or None when absent."""
        return self.extra_info.pop(key, None)

    def clear_extra_info(self) -> None:
        self.extra_info.clear()

    def has_extra_info(self, key: str) -> bool:
        return key in self.extra_info

    # ---- queries ----------------------------------------------------------
    @property
    def field_names(self) -> list[str]:
        """The fields, sorted."""
        return sorted(self.field_schema)

    @property
    def is_ready(self) -> bool:
        """The batch has samples and every one is produced."""
        return self.size > 0 and bool(np.all(np.asarray(self.production_status) == 1))

    def is_empty(self) -> bool:
        return self.size == 0

    @property
    def samples(self) -> _seqflow._SampleViewList:
        """Per-sample read-only views: samples[i].fields["x"], len(samples), iteration."""
        return _seqflow._SampleViewList(self)

    def _schema_entry(self, field_name: str) -> Mapping:
        if field_name not in self.field_schema:
            raise KeyError(f"Field {field_name!r} not found in field_schema; it has {self.field_names}")
        return self.field_schema[field_name]

    def get_dtypes(self, field_name: str) -> list:
        """The field's dtype, once per sample."""
        return [self._schema_entry(field_name).get("dtype")] * self.size

    def get_shapes(self, field_name: str) -> list:
        """Each sample's shape of the field (per_sample_shapes when the schema has them)."""
        entry = self._schema_entry(field_name)
        shapes = entry.get("per_sample_shapes")
        return list(shapes) if shapes is not None else [entry.get("shape")] * self.size

    # ---- selections -------------------------------------------------------
    def _rows(self, at: Sequence[int]) -> "BatchMeta":
        """The samples at positions `at` (checked; a range is a run)."""
        run = isinstance(at, range) and at.step == 1
        native = self._slice(at.start, at.stop) if run else self._select(np.asarray(at, dtype=np.int64))
        custom = None if self._custom_meta is None else _seqflow.copied_items(self._custom_meta, at)
        backend = None if self._backend_meta is None else _seqflow.copied_items(self._backend_meta, at)
        status = np.asarray(self.production_status, dtype=np.int8)[np.asarray(at, dtype=np.intp)]
        return BatchMeta._of(native, _copy_schema(self.field_schema, at), status, dict(self.extra_info), custom,
                             backend)

    def select_samples(self, sample_indices: Iterable[int]) -> "BatchMeta":
        """The samples at these positions (not global indexes) in [0, size), in this order."""
        return self._rows(positions(sample_indices, self.size, "sample_indices"))

    def select_fields(self, field_names: Iterable[str]) -> "BatchMeta":
        """The same samples with only those of these fields the batch has."""
        names = [field_names] if isinstance(field_names, str) else list(field_names)
        kept = [f for f in dict.fromkeys(names) if f in self.field_schema]
        backend = None if self._backend_meta is None else [
            {f: _deep_copy(v) for f, v in m.items() if f.startswith("_") or f in kept} for m in self._backend_meta]
        return BatchMeta._of(self._select_fields(kept), _copy_schema({f: self.field_schema[f] for f in kept}),
                             np.array(self.production_status, dtype=np.int8), _deep_copy(self.extra_info),
                             _deep_copy(self._custom_meta), backend)

    def __getitem__(self, item) -> "BatchMeta":
        """meta[i]: a batch of sample i (negative counts from the end); meta[a:b:c]: those samples."""
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            if not -self.size <= item < self.size:
                raise IndexError(f"BatchMeta index {item} out of range for a batch of {self.size}")
            return self._rows([int(item) % self.size])
        if isinstance(item, slice):
            return self._rows(range(*item.indices(self.size)))
        raise TypeError(f"Indexing with {type(item)} is not supported; use an int or a slice")

    def chunk(self, chunks: int) -> list["BatchMeta"]:
        """`chunks` consecutive parts with sizes chunk_sizes(size, chunks)."""
        return self.split(chunk_sizes(self.size, _seqflow.check_chunks(chunks)))

    def split(self, sizes: Sequence[int]) -> list["BatchMeta"]:
        """Consecutive parts of the given sizes (they must add up to size)."""
        if any(s < 0 for s in sizes) or sum(sizes) != self.size:
            raise ValueError(f"sizes {list(sizes)} must be >= 0 and add up to {self.size}")
        return [self._rows(range(a, b)) for a, b in bounds(sizes)]

    def chunk_by_partition(self) -> list["BatchMeta"]:
        """One part per partition, in order of first appearance."""
        return [self._rows(at.tolist()) for at in self._partition_positions()]

    def copy(self) -> "BatchMeta":
        """A deep copy (custom_meta still encoded stays so: the bytes are immutable)."""
        return BatchMeta._of(self._slice(0, self.size), _copy_schema(self.field_schema),
                             np.array(self.production_status, dtype=np.int8), _deep_copy(self.extra_info),
                             _deep_copy(self._custom_meta), _deep_copy(self._backend_meta))

    def reorder(self, indices: Sequence[int]) -> None:
        """Puts the samples in the order of these positions (a permutation of 0..size-1), in place."""
        indices = list(indices)
        if len(indices) != self.size:
            raise ValueError(f"Indices length {len(indices)} mismatch batch size {self.size}")
        if len(set(indices)) != self.size:
            raise ValueError(f"Indices contain duplicates: {indices}")
        other = self.select_samples(indices)
        self._reorder(np.asarray(indices, dtype=np.int64))
        self.production_status, self._custom_meta = other.production_status, other._custom_meta
        self._backend_meta = other._backend_meta
        for name, entry in other.field_schema.items():
            if "per_sample_shapes" in entry:
                self.field_schema[name]["per_sample_shapes"] = entry["per_sample_shapes"]

    # ---- combinations -----------------------------------------------------
    @classmethod
    def concat(cls, data: Sequence[Optional["BatchMeta"]], validate: bool = True) -> "BatchMeta":
        """The samples of all batches, in order (empty ones and None skipped).
        With validate, every batch must have the same fields with the same
        dtypes. extra_info: the union; a key with two values raises ValueError."""
        parts = [m for m in (data or []) if m is not None and m.size > 0]
        if not parts:
            return cls.empty()
        native = _Native._concat([p._to_native(custom_meta=False) for p in parts], validate)
        decoded = any(p._custom_meta is not None for p in parts)
        backend = any(p._backend_meta is not None for p in parts)
        return cls._of(native, _concat_schema(parts),
                       np.concatenate([np.asarray(p.production_status, dtype=np.int8).reshape(-1) for p in parts]),
                       _seqflow.merged_extra_info([p.extra_info for p in parts], "BatchMeta"),
                       [_deep_copy(m) for p in parts for m in p.custom_meta] if decoded else None,
                       [_deep_copy(m) for p in parts for m in p._custom_backend_meta] if backend else None)

    def union(self, other: Optional["BatchMeta"]) -> "BatchMeta":
        """The same samples with the fields of both: other's schema, extra_info
        and custom_meta keys win on a clash; a sample is produced when both say
        so. An empty side gives a copy of the other."""
        if not other:
            return self.copy()
        if self.size == 0:
            return other.copy()
        native = self._to_native(custom_meta=False)._union(other._to_native(custom_meta=False))
        schema = _copy_schema(self.field_schema)
        schema.update(_copy_schema(other.field_schema))
        custom = None if self._custom_meta is None and other._custom_meta is None else [
            dict(_deep_copy(a), **_deep_copy(b)) for a, b in zip(self.custom_meta, other.custom_meta)]
        backend = None if self._backend_meta is None and other._backend_meta is None else [
            dict(_deep_copy(a), **_deep_copy(b))
            for a, b in zip(self._custom_backend_meta, other._custom_backend_meta)]
        status = np.bitwise_and(np.asarray(self.production_status, dtype=np.int8),
                                np.asarray(other.production_status, dtype=np.int8))
        return BatchMeta._of(native, schema, status, {**self.extra_info, **other.extra_info}, custom, backend)

    def add_fields(self, tensor_dict, set_all_ready: bool = True) -> "BatchMeta":
        """Adds the fields of a TensorDict (or dict of fields) with one row per
        sample to field_schema, in place; with set_all_ready every sample
        becomes produced. Returns self."""
        rows, schema = _seqflow.field_schema.schema_of(tensor_dict)
        if rows == 0:
            logger.warning("add_fields: the input holds no samples; nothing added")
            return self
        if rows != self.size:
            raise ValueError(f"add_fields batch size mismatch: self.size={self.size} vs tensor_dict={rows}")
        self.field_schema.update(schema)
        if set_all_ready:
            self.production_status[:] = 1
        return self

    # ---- misc -------------------------------------------------------------
    def __getstate__(self):
        # The Python slots in order, then the C++ columns (custom_meta still encoded stays so).
        names = self._field_names
        native = (np.asarray(self.global_indexes, dtype=np.int64), self.partition_ids, self.generations, names,
                  self._field_status(names), self._encoded_meta)
        return tuple(getattr(self, slot) for slot in self.__slots__) + (native,)

    def __setstate__(self, state) -> None:
        indexes, partitions, generations, names, status, encoded = state[-1]
        _Native.__init__(self, indexes, partitions,
                         None if generations is None else np.asarray(generations, dtype=np.uint64), names, status,
                         encoded)
        for slot, value in zip(self.__slots__, state):
            # Ray's zero-copy deserialisation gives read-only arrays; add_fields writes.
            if slot == "production_status" and isinstance(value, np.ndarray) and not value.flags.writeable:
                value = value.copy()
            setattr(self, slot, value)

    def __str__(self) -> str:
        return (f"BatchMeta(size={self.size}, field_names={self.field_names}, is_ready={self.is_ready}, "
                f"global_indexes={self.global_indexes}, extra_info={self.extra_info})")

    def __repr__(self) -> str:
        shown = self.global_indexes[:8]
        more = "..." if self.size > 8 else ""
        return (f"BatchMeta(size={self.size}, global_indexes={shown}{more}, field_names={self.field_names}, "
                f"is_ready={self.is_ready})")

