"""BatchMeta and KVBatchMeta, TransferQueue 0.1.11's metadata objects.

``BatchMeta`` holds the engine's batch (``_seqflow.NativeBatchMeta``: the
columns, cut and joined in C++) beside the members that hold Python objects;
``chunk_sizes`` is the one split rule of data and metadata.
"""

from __future__ import annotations

import copy
import itertools
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Optional, TypeVar

import numpy as np

from seqflow import _seqflow
from seqflow._batch_meta_arguments import (
    dict_list,
    extra_info_of,
    field_schema_of,
    generations_of,
    global_indexes_of,
    partition_ids_of,
    production_status_of,
)
from seqflow._checks import INT64_MIN, _wrong_type, check_count, check_parts, check_positions
from seqflow._extra_info import merged_extra_info
from seqflow._field_schema import concat_schema, copy_schema, from_engine, schema_of, to_engine
from seqflow._sample_views import _SampleViewList
from seqflow.kv_batch_meta import KVBatchMeta

__all__ = ["BatchMeta", "KVBatchMeta", "chunk_sizes"]

chunk_sizes = _seqflow.chunk_sizes
_NativeBatchMeta = _seqflow.NativeBatchMeta
# The engine's entry of a field built by hand: the Python field_schema is the truth for it.
_BY_HAND = _seqflow.NativeFieldSchema("uint8", [], False, False)
_SHOWN_INDEXES = 8
_log = logging.getLogger("seqflow.batch_meta")

Meta = TypeVar("Meta", bound="BatchMeta")


_PLAIN_TYPES = frozenset((bool, int, float, str, type(None)))


def _copy_dict(entry: dict) -> dict:
    """copy.deepcopy(entry), without its cost for a dict of plain values (custom_meta's usual one)."""
    if type(entry) is dict and _PLAIN_TYPES.issuperset(map(type, entry.values())):
        return entry.copy()
    return copy.deepcopy(entry)


def _all_plain(entries: list) -> bool:
    """Every entry a dict of plain values (custom_meta's usual ones), checked at C speed."""
    return set(map(type, entries)) <= {dict} and _PLAIN_TYPES.issuperset(
        map(type, itertools.chain.from_iterable(map(dict.values, entries))))


def _copied_dicts(entries: Optional[list], at: Optional[Iterable[int]] = None) -> Optional[list]:
    """A deep copy of each entry (at these positions) on its own."""
    if entries is None:
        return None
    picked = entries if at is None else [entries[i] for i in at]
    return list(map(dict.copy, picked)) if _all_plain(picked) else [_copy_dict(entry) for entry in picked]


def _deep_copied(entries: Optional[list]) -> Optional[list]:
    """copy.deepcopy(entries): entries shared in the list stay shared in the copy."""
    if entries is not None and len(set(map(id, entries))) == len(entries) and _all_plain(entries):
        return list(map(dict.copy, entries))
    return copy.deepcopy(entries)


def _int8(status: Any) -> np.ndarray:
    return np.asarray(status, dtype=np.int8).reshape(-1)


class BatchMeta:
    """Metadata of a batch of samples: which samples it holds and what is known about them.

    TransferQueue 0.1.11's constructor, attributes and methods over seqflow's C++ BatchMeta
    (include/seqflow/batch_meta.h), which holds the columns and does the cutting and joining:
    ``global_indexes``, ``partition_ids``, ``generations`` (per sample, the generation the
    controller gave its index; a stale or foreign batch is refused with ``StaleSampleError``;
    None when built by hand), which fields of each sample are produced, and custom_meta as the
    engine's MessagePack, decoded on first read. Beside them it keeps what holds Python objects:
    ``field_schema`` (``{field: {dtype, shape, is_nested, is_non_tensor, per_sample_shapes?}}``,
    dtypes as the caller gave them), ``production_status`` (int8 per sample; 1 counts as every
    field produced), ``extra_info``, custom_meta once decoded (then it is the truth) and
    TransferQueue's ``_custom_backend_meta``. A batch the engine made builds field_schema and
    production_status from its columns on first read. ``transfer_queue.metadata.BatchMeta`` is
    this class. ``chunk`` and the data's micro-batch split share one rule, ``chunk_sizes``.
    """

    # _field_schema and _production_status: None until read in a batch the engine made (the
    # properties build them from its columns). BatchMeta.__slots__ is set again below the class.
    __slots__ = ("_field_schema", "_production_status", "extra_info", "_custom_meta", "_backend_meta", "_native")

    _field_schema: Optional[dict[str, dict[str, Any]]]
    _production_status: Optional[np.ndarray]
    extra_info: dict[Any, Any]
    _custom_meta: Optional[list[dict]]
    _backend_meta: Optional[list[dict]]
    _native: Any

    def __init__(self, global_indexes: Any = (), partition_ids: Any = (), field_schema: Any = None,
                 production_status: Any = None, extra_info: Any = None, custom_meta: Any = None,
                 _custom_backend_meta: Any = None, generations: Any = None) -> None:
        """A batch of these samples (global_indexes and partition_ids, one each per sample); every
        argument is checked and copied. production_status: one int8 per sample, or a samples x fields
        matrix in field_schema order; custom_meta and _custom_backend_meta: one dict per sample."""
        indexes = global_indexes_of(global_indexes)
        n = len(indexes)
        ids = partition_ids_of(partition_ids, n)
        known = generations_of(generations, n)
        schema = field_schema_of(field_schema, n)
        status, produced = production_status_of(production_status, n, schema)
        info = extra_info_of(extra_info)
        backend = dict_list(_custom_backend_meta, n, "_custom_backend_meta") if _custom_backend_meta else None
        given = None if custom_meta is None or (isinstance(custom_meta, (list, tuple)) and not custom_meta) else \
            dict_list(custom_meta, n, "custom_meta")
        self._native = _NativeBatchMeta(indexes, ids, known, dict.fromkeys(schema, _BY_HAND), produced)
        self.field_schema, self.production_status, self.extra_info = schema, status, info
        # None: the engine's (empty) bytes are the truth until read.
        self._custom_meta, self._backend_meta = given, backend

    @classmethod
    def _of_native(cls: type[Meta], native: Any, extra_info: Optional[Mapping] = None) -> Meta:
        """The engine's batch (taken over, not copied); extra_info copied. field_schema and
        production_status are built on first read."""
        meta = cls.__new__(cls)
        meta._native = native
        meta.extra_info = dict(extra_info) if extra_info else {}
        meta._field_schema = meta._production_status = meta._custom_meta = meta._backend_meta = None
        return meta

    @classmethod
    def _assemble(cls: type[Meta], native: Any, field_schema: Optional[dict], production_status: Optional[np.ndarray],
                  extra_info: dict, custom_meta: Optional[list], backend_meta: Optional[list]) -> Meta:
        """A batch of this class; field_schema / production_status None: built from `native`."""
        out = cls.__new__(cls)
        out._native, out._field_schema, out._production_status = native, field_schema, production_status
        out.extra_info, out._custom_meta, out._backend_meta = extra_info, custom_meta, backend_meta
        return out

    @property
    def field_schema(self) -> dict[str, dict[str, Any]]:
        """{field: {dtype, shape, is_nested, is_non_tensor, per_sample_shapes?}}, dtypes as the caller gave them."""
        if self._field_schema is None:
            self._field_schema = {field: from_engine(entry) for field, entry in self._native.field_schema.items()}
        return self._field_schema

    @field_schema.setter
    def field_schema(self, value: dict[str, dict[str, Any]]) -> None:
        self._field_schema = value

    @property
    def production_status(self) -> np.ndarray:
        """int8 per sample (numpy); 1 counts as every field produced."""
        if self._production_status is None:
            self._production_status = self._native.ready().astype(np.int8)
        return self._production_status

    @production_status.setter
    def production_status(self, value: np.ndarray) -> None:
        self._production_status = value

    def _as_the_engine_made(self) -> bool:
        """field_schema and production_status are still the engine's (neither read nor set)."""
        return self._field_schema is None and self._production_status is None

    @classmethod
    def empty(cls: type[Meta], extra_info: Any = None) -> Meta:
        """A batch of no samples."""
        return cls(extra_info=extra_info)

    # ---- the engine's columns ----------------------------------------------------

    @property
    def size(self) -> int:
        """Number of samples."""
        return self._native.size

    def __len__(self) -> int:
        return self._native.size

    @property
    def global_indexes(self) -> list[int]:
        """Per sample, its index in its partition."""
        return self._native.global_indexes.tolist()

    @property
    def partition_ids(self) -> list[str]:
        """Per sample, its partition (one str object per run of samples)."""
        names, counts = self._native.partition_runs
        if len(names) == 1:
            return names * counts[0]
        return list(itertools.chain.from_iterable(itertools.repeat(name, count) for name, count in zip(names, counts)))

    @partition_ids.setter
    def partition_ids(self, ids: Any) -> None:
        self._replace_columns(partition_ids=list(ids))

    @property
    def generations(self) -> Optional[list[int]]:
        """Per sample, the generation the controller gave its global index; None when not known."""
        known = self._native.generations
        return None if known is None else known.tolist()

    @generations.setter
    def generations(self, generations: Optional[Iterable[int]]) -> None:
        self._replace_columns(generations=None if generations is None else np.array(list(generations), np.uint64))

    @property
    def write_versions(self) -> dict[str, list[int]]:
        """Per overwritten field, the committed write each sample reads (0: its first write); fields
        never overwritten are absent."""
        return self._native.write_versions

    @property
    def _encoded_meta(self) -> tuple[bytes, np.ndarray]:
        """custom_meta as MessagePack bytes and uint32 offsets."""
        return self._native.custom_meta_bytes, self._native.custom_meta_offsets

    @_encoded_meta.setter
    def _encoded_meta(self, encoded: tuple[bytes, np.ndarray]) -> None:
        data, offsets = encoded
        self._replace_columns(custom_meta_bytes=data, custom_meta_offsets=np.asarray(offsets, dtype=np.uint32))

    def _replace_columns(self, **changes: Any) -> None:
        """A new engine batch with these columns changed (the field_schema and production_status
        read first: the new one's field entries are names only)."""
        native, names = self._native, sorted(self.field_schema)
        self.production_status  # noqa: B018 (built while the engine's bits are at hand)
        columns = dict(global_indexes=native.global_indexes, partition_ids=self.partition_ids,
                       generations=native.generations, field_schema=dict.fromkeys(names, _BY_HAND),
                       produced=native.field_produced(names), custom_meta_bytes=native.custom_meta_bytes,
                       custom_meta_offsets=native.custom_meta_offsets, write_versions=native.write_versions)
        columns.update(changes)
        self._native = _NativeBatchMeta(**columns)

    def _engine_view(self, custom_meta: bool = True) -> Any:
        """The engine's batch as seqflow's calls read it: the field entries of field_schema (dtypes
        by name), each field's produced bits (production_status 1 counts as every field), and with
        custom_meta, the decoded custom_meta (else the bytes, checked)."""
        decoded = self._custom_meta if custom_meta else None
        if decoded is None and self._as_the_engine_made():
            return self._native
        names = sorted(self.field_schema)
        schemas = {name: to_engine(name, self.field_schema[name]) for name in names}
        return self._native.engine_view(schemas, self._field_produced(names), decoded)

    # ---- the members that hold Python objects ------------------------------------

    @property
    def custom_meta(self) -> list[dict]:
        """One dict per sample."""
        if self._custom_meta is None:
            self._custom_meta = self._native.decoded_custom_meta()
        return self._custom_meta

    @custom_meta.setter
    def custom_meta(self, value: Any) -> None:
        self._custom_meta = dict_list(value, self.size, "custom_meta")

    @property
    def _custom_backend_meta(self) -> list[dict]:
        """Per sample, storage-backend metadata (TransferQueue's; seqflow's storage needs none)."""
        if self._backend_meta is None:
            self._backend_meta = [{} for _ in range(self.size)]
        return self._backend_meta

    @_custom_backend_meta.setter
    def _custom_backend_meta(self, value: Any) -> None:
        self._backend_meta = dict_list(value, self.size, "_custom_backend_meta")

    def _changed_custom_meta(self) -> Optional[list[dict]]:
        """custom_meta when a caller may have changed it (it was decoded), else None."""
        return self._custom_meta

    def get_all_custom_meta(self) -> list[dict]:
        """A deep copy of custom_meta (an encoded batch decodes afresh and stays encoded)."""
        if self._custom_meta is None:
            return self._native.decoded_custom_meta()
        return copy.deepcopy(self._custom_meta)

    def update_custom_meta(self, custom_meta: Any) -> None:
        """Merges one dict per sample into custom_meta (key by key); the controller learns it at the
        next put or set_custom_meta."""
        if custom_meta is None:
            return
        entries = dict_list(custom_meta, self.size, "custom_meta", copy_entries=False, empty_is_none=False)
        for mine, entry in zip(self.custom_meta, entries):
            mine.update(entry)

    def clear_custom_meta(self) -> None:
        """Empties every sample's custom_meta."""
        self._custom_meta = [{} for _ in range(self.size)]

    def get_extra_info(self, key: Any, default: Any = None) -> Any:
        """extra_info[key], or default when absent."""
        return self.extra_info.get(key, default)

    def set_extra_info(self, key: Any, value: Any) -> None:
        """Sets extra_info[key]."""
        self.extra_info[key] = value

    def get_all_extra_info(self) -> dict:
        """A deep copy of extra_info."""
        return copy.deepcopy(self.extra_info)

    def update_extra_info(self, info_dict: Any) -> None:
        """extra_info.update(info_dict)."""
        self.extra_info.update(info_dict)

    def remove_extra_info(self, key: Any) -> Any:
        """Removes the key; its value, or None when absent."""
        return self.extra_info.pop(key, None)

    def clear_extra_info(self) -> None:
        """Empties extra_info."""
        self.extra_info.clear()

    def has_extra_info(self, key: Any) -> bool:
        """Whether extra_info holds the key."""
        return key in self.extra_info

    # ---- queries -------------------------------------------------------------------

    @property
    def field_names(self) -> list[str]:
        """The fields, sorted."""
        return sorted(self.field_schema) if self._field_schema is not None else self._native.field_names

    def _ready(self) -> np.ndarray:
        """Per sample: production_status == 1."""
        if self._production_status is None:
            return self._native.ready()
        flat = np.asarray(self.production_status).reshape(-1)
        if len(flat) != self.size:
            raise ValueError(f"production_status has {len(flat)} entries for {self.size} samples")
        return flat == 1

    @property
    def is_ready(self) -> bool:
        """The batch has samples and every one is produced."""
        return self.size > 0 and bool(self._ready().all())

    def is_empty(self) -> bool:
        """The batch has no samples."""
        return self.size == 0

    @property
    def samples(self) -> _SampleViewList:
        """Per-sample read-only views: samples[i].fields["x"], len(samples), iteration."""
        return _SampleViewList(self)

    def _schema_entry(self, field_name: Any) -> Any:
        if field_name not in self.field_schema:
            raise KeyError(f"Field {field_name!r} not found in field_schema; it has {self.field_names}")
        return self.field_schema[field_name]

    def get_dtypes(self, field_name: Any) -> list[Any]:
        """The field's dtype, once per sample."""
        return [self._schema_entry(field_name).get("dtype")] * self.size

    def get_shapes(self, field_name: Any) -> list[Any]:
        """Each sample's shape of the field (per_sample_shapes when the schema has them)."""
        entry = self._schema_entry(field_name)
        shapes = entry.get("per_sample_shapes")
        return list(shapes) if shapes is not None else [entry.get("shape")] * self.size

    def _field_produced(self, names: Iterable[str]) -> np.ndarray:
        """(size, len(names)) bools: sample i has field names[j]: it is in field_schema and the
        sample's production_status is 1 or the engine said so."""
        names = list(names)
        produced = self._native.field_produced(names)
        if self._as_the_engine_made():
            return produced
        known = np.array([name in self.field_schema for name in names], dtype=bool)
        return (produced | self._ready()[:, None]) & known

    def _produced_fields(self) -> list[str]:
        """The fields every sample has."""
        if self._as_the_engine_made():
            return self._native.produced_fields()
        names = self.field_names
        everywhere = self._field_produced(names).all(axis=0)
        return [name for name, produced in zip(names, everywhere.tolist()) if produced]

    # ---- selections and joins -------------------------------------------------------

    def _rows(self: Meta, native: Any, at: list[int]) -> Meta:
        """The batch of `native` (self's samples at positions `at`)."""
        schema, status = self._field_schema, self._production_status
        return type(self)._assemble(native, None if schema is None else copy_schema(schema, at),
                          None if status is None else _int8(status)[at],
                          dict(self.extra_info), _copied_dicts(self._custom_meta, at),
                          _copied_dicts(self._backend_meta, at))

    def _at(self: Meta, at: list[int]) -> Meta:
        run = all(b == a + 1 for a, b in zip(at, at[1:]))
        if run:
            native = self._native.slice(at[0], at[-1] + 1) if at else self._native.slice(0, 0)
        else:
            native = self._native.select_samples(np.array(at, dtype=np.int64))
        return self._rows(native, at)

    def select_samples(self: Meta, sample_indices: Any) -> Meta:
        """The samples at these positions (not global indexes) in [0, size), in this order."""
        return self._at(check_positions(sample_indices, self.size, "sample_indices"))

    def __getitem__(self: Meta, item: Any) -> Meta:
        """meta[i]: a batch of sample i (negative counts from the end); meta[a:b:c]: those samples."""
        n = self.size
        if not isinstance(item, (bool, np.bool_)) and isinstance(item, (int, np.integer)):
            if not -n <= item < n:
                raise IndexError(f"BatchMeta index {item} out of range for a batch of {n}")
            return self._at([int(item) + n if item < 0 else int(item)])
        if isinstance(item, slice):
            return self._at(list(range(*item.indices(n))))
        raise TypeError(f"Indexing with {type(item)} is not supported; use an int or a slice")

    def select_fields(self: Meta, field_names: Any) -> Meta:
        """The same samples with only those of these fields the batch has."""
        names = [field_names] if isinstance(field_names, str) else list(field_names)
        kept = [name for name in dict.fromkeys(names) if name in self.field_schema]
        backend = None
        if self._backend_meta is not None:
            # Entries of the kept fields, and those of no field (an underscore key).
            backend = [{key: copy.deepcopy(value) for key, value in entry.items()
                        if str(key).startswith("_") or key in kept} for entry in self._backend_meta]
        schema = copy_schema({name: self.field_schema[name] for name in kept})
        return type(self)._assemble(self._native.select_fields(kept), schema,
                          np.array(self.production_status, dtype=np.int8, copy=True), copy.deepcopy(self.extra_info),
                          _deep_copied(self._custom_meta), backend)

    def _parts(self: Meta, natives: list, sizes: Iterable[int]) -> list[Meta]:
        out, begin = [], 0
        for native, count in zip(natives, sizes):
            out.append(self._rows(native, list(range(begin, begin + count))))
            begin += count
        return out

    def chunk(self: Meta, chunks: Any) -> list[Meta]:
        """`chunks` consecutive parts with sizes chunk_sizes(size, chunks)."""
        sizes = chunk_sizes(self.size, check_parts(chunks, "chunks"))
        return self._parts(self._native.split(sizes), sizes)

    def split(self: Meta, sizes: Any) -> list[Meta]:
        """Consecutive parts of the given sizes (they must add up to size)."""
        given = list(sizes)
        counts = [check_count(size, "sizes", minimum=INT64_MIN) for size in given]
        if any(count < 0 for count in counts) or sum(counts) != self.size:
            raise ValueError(f"sizes {given} must be >= 0 and add up to {self.size}")
        return self._parts(self._native.split(counts), counts)

    def chunk_by_partition(self: Meta) -> list[Meta]:
        """One part per partition, in order of first appearance."""
        return [self._at(at) for at in self._native.partition_positions()]

    def copy(self: Meta) -> Meta:
        """A deep copy (custom_meta still encoded stays so: the bytes are immutable)."""
        return type(self)._assemble(self._native.copy(),
                          copy_schema(self.field_schema) if self._field_schema is not None else None,
                          np.array(self.production_status, dtype=np.int8, copy=True)
                          if self._production_status is not None else None,
                          copy.deepcopy(self.extra_info), _deep_copied(self._custom_meta),
                          _deep_copied(self._backend_meta))

    def reorder(self, indices: Any) -> None:
        """Puts the samples in the order of these positions (a permutation of 0..size-1), in place."""
        given = list(indices)
        if len(given) != self.size:
            raise ValueError(f"Indices length {len(given)} mismatch batch size {self.size}")
        if len(set(given)) != self.size:
            raise ValueError(f"Indices contain duplicates: {given}")
        at = check_positions(given, self.size, "sample_indices")
        if self._production_status is not None:
            self.production_status = _int8(self.production_status)[at]
        # Moved, not copied (as TransferQueue's): the batch owns its dicts.
        if self._custom_meta is not None:
            self._custom_meta = [self._custom_meta[i] for i in at]
        if self._backend_meta is not None:
            self._backend_meta = [self._backend_meta[i] for i in at]
        if self._field_schema is not None:
            for entry in self.field_schema.values():
                if entry.get("per_sample_shapes") is not None:
                    entry["per_sample_shapes"] = [entry["per_sample_shapes"][i] for i in at]
        self._native.reorder(np.array(at, dtype=np.int64))

    def union(self: Meta, other: Any) -> Meta:
        """The same samples with the fields of both: other's schema, extra_info and custom_meta keys win
        on a clash; a sample is produced when both say so. An empty side gives a copy of the other."""
        if not other:
            return self.copy()
        if not isinstance(other, BatchMeta):
            raise TypeError(f"other must be a BatchMeta, got {type(other).__name__}")
        if self.size == 0:
            return other.copy()
        native = self._engine_view(False).union_with(other._engine_view(False))
        decoded = self._custom_meta is not None or other._custom_meta is not None
        backend = self._backend_meta is not None or other._backend_meta is not None
        return type(self)._assemble(native, {**copy_schema(self.field_schema), **copy_schema(other.field_schema)},
                          np.bitwise_and(_int8(self.production_status), _int8(other.production_status)),
                          {**self.extra_info, **other.extra_info},
                          _merged_dicts(self.custom_meta, other.custom_meta) if decoded else None,
                          _merged_dicts(self._custom_backend_meta, other._custom_backend_meta) if backend else None)

    @classmethod
    def concat(cls: type[Meta], data: Any, validate: bool = True) -> Meta:
        """The samples of all batches, in order (empty ones and None skipped). With validate, every batch
        must have the same fields with the same dtypes. extra_info: the union; a key with two values
        raises ValueError."""
        parts = []
        for i, part in enumerate(data if data else ()):
            if part is not None and not isinstance(part, BatchMeta):
                raise _wrong_type(part, f"data[{i}]", "a BatchMeta or None")
            if part is not None and part.size > 0:
                parts.append(part)
        if not parts:
            return cls.empty()
        native = _NativeBatchMeta.concat([part._engine_view(False) for part in parts], validate)
        decoded = any(part._custom_meta is not None for part in parts)
        backend = any(part._backend_meta is not None for part in parts)
        return cls._assemble(native, concat_schema(parts),
                         np.concatenate([_int8(part.production_status) for part in parts]),
                         merged_extra_info([part.extra_info for part in parts], "BatchMeta"),
                         _copied_dicts([e for part in parts for e in part.custom_meta]) if decoded else None,
                         _copied_dicts([e for part in parts for e in part._custom_backend_meta]) if backend else None)

    def add_fields(self: Meta, tensor_dict: Any, set_all_ready: Any = True) -> Meta:
        """Adds the fields of a TensorDict (or dict of fields) with one row per sample to field_schema,
        in place; with set_all_ready every sample becomes produced. Returns self."""
        rows, found = schema_of(tensor_dict)
        if rows == 0:
            _log.warning("add_fields: the input holds no samples; nothing added")
            return self
        if rows != self.size:
            raise ValueError(f"add_fields batch size mismatch: self.size={self.size} vs tensor_dict={rows}")
        self.field_schema.update(found)
        if set_all_ready:
            self.production_status[:] = 1
        return self

    # ---- pickling and text -------------------------------------------------------------

    def __getstate__(self) -> tuple:
        native = self._native
        names = native.field_names
        known = native.generations  # an array (earlier builds wrote a list; both load)
        generations = None if known is None else np.array(known)
        columns = (np.array(native.global_indexes), self.partition_ids, generations, names,
                   native.field_produced(names), (native.custom_meta_bytes, native.custom_meta_offsets),
                   native.write_versions)
        # custom_meta still encoded stays so.
        return (self.field_schema, self.production_status, self.extra_info, self._custom_meta, self._backend_meta,
                columns)

    def __setstate__(self, state: tuple) -> None:
        if len(state) != 6:
            raise ValueError("a BatchMeta's state holds 6 entries")
        columns = state[5]
        # 6 entries: pickled before write versions existed.
        if len(columns) not in (6, 7):
            raise ValueError(f"a BatchMeta's columns state holds 6 or 7 entries, got {columns!r}")
        generations = None if columns[2] is None else np.ascontiguousarray(columns[2], dtype=np.uint64)
        self._native = _NativeBatchMeta(
            np.ascontiguousarray(columns[0], dtype=np.int64), list(columns[1]), generations,
            dict.fromkeys(columns[3], _BY_HAND), np.ascontiguousarray(columns[4], dtype=bool), columns[5][0],
            np.ascontiguousarray(columns[5][1], dtype=np.uint32), columns[6] if len(columns) == 7 else {})
        self.field_schema, status, self.extra_info, self._custom_meta, self._backend_meta = state[:5]
        # Ray's zero-copy deserialisation gives read-only arrays; add_fields writes.
        if isinstance(status, np.ndarray) and not status.flags.writeable:
            status = status.copy()
        self.production_status = status

    def __str__(self) -> str:
        return (f"BatchMeta(size={self.size}, field_names={self.field_names}, is_ready={self.is_ready}, "
                f"global_indexes={self.global_indexes}, extra_info={self.extra_info})")

    def __repr__(self) -> str:
        shown = self._native.global_indexes[:_SHOWN_INDEXES].tolist()
        more = "..." if self.size > _SHOWN_INDEXES else ""
        return (f"BatchMeta(size={self.size}, global_indexes={shown}{more}, field_names={self.field_names}, "
                f"is_ready={self.is_ready})")


# The names of __getstate__'s first five entries, in this order (the engine's columns follow):
# TransferQueue's tests find production_status in the state by BatchMeta.__slots__, as its own
# BatchMeta's state is its slots. (The attribute only; the class's slots are the ones above.)
BatchMeta.__slots__ = ("field_schema", "production_status", "extra_info", "_custom_meta", "_backend_meta")


def _merged_dicts(left: list[dict], right: list[dict]) -> list[dict]:
    """[dict(a) | b for a, b in zip(left, right)], each copied deeply."""
    return [{**copy.deepcopy(a), **copy.deepcopy(b)} for a, b in zip(left, right)]
