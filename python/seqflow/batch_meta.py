"""BatchMeta: which samples a batch holds and what is known about them.

Columnar, with TransferQueue 0.1.11's constructor, attributes and methods:
``global_indexes`` (list of int), ``partition_ids`` (one per sample),
``field_schema`` (``{field: {dtype, shape, is_nested, is_non_tensor,
per_sample_shapes?}}``), ``production_status`` (int8 array, one per sample:
1 when every field of the batch is produced), ``custom_meta`` (one dict per
sample) and ``extra_info`` (a dict). ``transfer_queue.metadata.BatchMeta`` is
this class under seqflow.compat.

Beyond TransferQueue:
- The engine also says which fields of a sample are produced; that matrix
  travels privately beside ``production_status`` (the kv API and a put with
  metadata use it) and a sample whose ``production_status`` is 1 counts as
  having every field.
- ``generations`` (list of int, or None): per sample, the generation the
  controller gave its global index (it changes whenever a cleared sample's
  index is handed out again). Every call that takes a BatchMeta refuses a
  stale one (its samples cleared, the indexes reused since) or a foreign one
  (partition_ids naming another partition) with ``StaleSampleError``, a
  KeyError, instead of reaching another sample's data. A BatchMeta built by
  hand has none (None; 0 for a sample in a concatenation): it is checked by
  partition only.
- custom_meta arrives from the engine as MessagePack and is decoded on first
  read; selections, splits and concatenations cut the bytes without decoding.
- ``field_schema`` dtypes are names ("float32") as the engine reports them;
  torch or numpy dtypes given by the caller are kept as given.

``chunk`` and the micro-batch split of the data (seqflow.streaming) use one
rule, ``chunk_sizes``: n parts whose sizes differ by at most one, larger parts
first. TransferQueue split data [3, 3, 1] but metadata [3, 2, 2]; here data
and metadata always agree.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import numbers
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from seqflow._checks import INT64_MAX, check_name, check_names, check_optional_name

__all__ = ["BatchMeta", "KVBatchMeta", "chunk_sizes"]

logger = logging.getLogger(__name__)


def chunk_sizes(total: int, parts: int) -> list[int]:
    """Sizes of `parts` consecutive chunks of `total` items: as equal as
    possible, the larger ones first (7 into 3 -> [3, 2, 2])."""
    if isinstance(parts, bool) or not isinstance(parts, (int, np.integer)) or parts < 1:
        raise ValueError(f"parts must be an integer >= 1, got {parts!r}")
    if total < 0:
        raise ValueError(f"total must be >= 0, got {total}")
    base, extra = divmod(int(total), int(parts))
    return [base + 1 if i < extra else base for i in range(int(parts))]


def _check_chunks(chunks) -> int:
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
        raise ValueError(f"chunks must be an integer >= 1, got {chunks!r}")
    return int(chunks)


def _bounds(sizes: Sequence[int]) -> list[tuple[int, int]]:
    out, start = [], 0
    for size in sizes:
        out.append((start, start + size))
        start += size
    return out


def _values_equal(a: Any, b: Any) -> bool:
    """extra_info values agree: same type and equal (arrays and tensors
    element by element, never an ambiguous truth value)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    if hasattr(a, "equal") and type(a).__module__.startswith("torch"):
        return bool(a.equal(b))
    try:
        return bool(a == b)
    except (TypeError, ValueError, RuntimeError):
        return False


def _merged_extra_info(infos: list[Mapping], owner: str) -> dict:
    """The union of the chunks' extra_info; a key with different values in
    two chunks raises ValueError."""
    if any(set(info) != set(infos[0]) for info in infos[1:]):
        logger.warning("%s.concat: extra_info key sets differ across chunks; taking the union of keys", owner)
    merged: dict = {}
    for i, info in enumerate(infos):
        for key, value in info.items():
            if key not in merged:
                merged[key] = value
            elif not _values_equal(merged[key], value):
                raise ValueError(f"{owner}.concat: extra_info key {key!r} has conflicting values across chunks "
                                 f"and cannot be merged: {merged[key]!r} and, in chunk[{i}], {value!r}")
    return merged


# ---- custom_meta as the engine sends it: MessagePack bytes + uint32 offsets ----

def _select_encoded(encoded: tuple[bytes, np.ndarray], positions: list[int]) -> tuple[bytes, np.ndarray]:
    """The encoded custom_meta of the samples at `positions` (in range): their
    bytes cut out and joined, nothing decoded, so that splitting a fetched
    batch costs no dict per sample."""
    data, offsets = encoded
    first = positions[0] if positions else 0
    if positions == list(range(first, first + len(positions))):  # a run, as chunk and split take
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


def _concat_encoded(parts: list[tuple[bytes, np.ndarray]]) -> tuple[bytes, np.ndarray]:
    offsets, shift = [np.zeros(1, dtype=np.uint32)], 0
    for data, part_offsets in parts:
        offsets.append(np.asarray(part_offsets[1:], dtype=np.uint32) + np.uint32(shift))
        shift += len(data)
    return b"".join(data for data, _ in parts), np.concatenate(offsets)


def _decode(encoded: tuple[bytes, np.ndarray]) -> list[dict]:
    from seqflow import _seqflow

    return _seqflow.client.decode_custom_meta(*encoded)


# ---- field_schema ----------------------------------------------------------

# Schema values that copies may share: immutable (dtypes are, too).
_IMMUTABLE = frozenset((str, bytes, int, float, bool, tuple, type(None)))


def _is_immutable(value) -> bool:
    kind = type(value)
    return (kind in _IMMUTABLE or isinstance(value, (tuple, np.dtype))
            or (kind.__module__, kind.__name__) == ("torch", "dtype"))


def _copy_schema(schema: Mapping, positions: Optional[list[int]] = None) -> dict:
    """A copy that shares nothing mutable with `schema`; with positions, the
    per_sample_shapes of those samples only."""
    out = {}
    for name, entry in schema.items():
        entry = dict(entry)
        for key, value in entry.items():
            if not _is_immutable(value):
                entry[key] = copy.deepcopy(value)
        shapes = entry.get("per_sample_shapes")
        if positions is not None and shapes is not None:
            entry["per_sample_shapes"] = [shapes[i] for i in positions]
        out[name] = entry
    return out


# The engine's dtype names (numpy's spelling, and torch's for bfloat16).
_DTYPE_NAMES = frozenset(("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
                          "float64"))


def _dtype_name(dtype) -> Optional[str]:
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


def _common_shape(shapes: list[tuple]) -> tuple:
    """The shape the engine reports for samples of these shapes: -1 where they differ."""
    first = shapes[0]
    if any(len(s) != len(first) for s in shapes):
        return (-1,) * max(len(s) for s in shapes)
    return tuple(d if all(s[k] == d for s in shapes) else -1 for k, d in enumerate(first))


def _nested_entry(dtype, shapes: list[tuple]) -> dict:
    return {"dtype": _dtype_name(dtype), "shape": _common_shape(shapes), "is_nested": True,
            "is_non_tensor": False, "per_sample_shapes": shapes}


_NON_TENSOR = {"dtype": None, "shape": None, "is_nested": False, "is_non_tensor": True}


def _field_entry(name: str, value, rows: int) -> dict:
    """The schema of one field of `rows` samples, as the engine would report it."""
    if hasattr(value, "tolist") and type(value).__name__ in ("NonTensorStack", "NonTensorData"):
        value = value.tolist()
    if type(value).__module__.startswith("torch") and hasattr(value, "is_nested"):
        samples = list(value.unbind()) if value.is_nested else None
        count = len(samples) if samples is not None else (value.shape[0] if value.dim() else 0)
        if count != rows:
            raise ValueError(f"field {name!r} holds {count} samples, the batch {rows}")
        if samples is not None:
            return _nested_entry(value.dtype, [tuple(t.shape) for t in samples])
        return {"dtype": _dtype_name(value.dtype), "shape": tuple(value.shape[1:]), "is_nested": False,
                "is_non_tensor": False}
    if isinstance(value, np.ndarray) and value.dtype.kind not in "OUS":
        if value.ndim == 0 or value.shape[0] != rows:
            count = value.shape[0] if value.ndim else "no"
            raise ValueError(f"field {name!r} holds {count} samples, the batch {rows}")
        return {"dtype": value.dtype.name, "shape": value.shape[1:], "is_nested": False, "is_non_tensor": False}
    items = list(value) if isinstance(value, (list, tuple, np.ndarray)) else None
    if items is None:
        raise ValueError(f"field {name!r} is a {type(value).__name__}; give a tensor, an array or a list")
    if len(items) != rows:
        raise ValueError(f"field {name!r} holds {len(items)} samples, the batch {rows}")
    if items and all(hasattr(i, "shape") and hasattr(i, "dtype") for i in items):
        return _nested_entry(items[0].dtype, [tuple(i.shape) for i in items])
    if items and all(isinstance(i, (numbers.Number, np.bool_)) and not isinstance(i, complex) for i in items):
        return {"dtype": np.asarray(items).dtype.name, "shape": (), "is_nested": False, "is_non_tensor": False}
    return dict(_NON_TENSOR)


def _schema_of(data) -> tuple[int, dict]:
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


# ---- positions ----------------------------------------------------------------

def _positions(values, size: int, name: str) -> list[int]:
    """`values` as a list of positions in [0, size); ValueError naming `name` otherwise."""
    if isinstance(values, range) and (not values or (0 <= min(values) and max(values) < size)):
        return list(values)  # chunk and split take runs
    at = np.asarray(values if isinstance(values, np.ndarray) else list(values))
    if at.size == 0:
        return []
    if at.ndim != 1 or at.dtype.kind not in "iu":
        raise ValueError(f"{name} must be a list of integer positions, got {values!r}")
    if at.min() < 0 or at.max() >= size:
        raise ValueError(f"{name} must lie in [0, {size}), got {at.tolist()}")
    return at.tolist()


class _SampleView:
    """One sample of a BatchMeta, read-only (dicts are MappingProxyType)."""

    __slots__ = ("_batch", "_idx")

    def __init__(self, batch: "BatchMeta", idx: int) -> None:
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

    def __init__(self, batch: "BatchMeta") -> None:
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


class BatchMeta:
    """Metadata of a batch of samples (see the module docstring)."""

    # _custom_meta / _encoded_meta: custom_meta decoded, or still MessagePack
    # (one of them is set). _backend_meta: _custom_backend_meta, None while
    # all empty. _field_status: (field names, samples x names bools) from the
    # engine, or None. generations last: pickles of batches from before it
    # still load (without generations).
    __slots__ = ("global_indexes", "partition_ids", "field_schema", "production_status", "extra_info",
                 "_custom_meta", "_encoded_meta", "_backend_meta", "_field_status", "generations")

    def __init__(self, global_indexes: Iterable[int] = (), partition_ids: Iterable[str] = (),
                 field_schema: Optional[Mapping[str, Mapping]] = None, production_status=None,
                 extra_info: Optional[Mapping[str, Any]] = None, custom_meta: Optional[Sequence[dict]] = None,
                 _custom_backend_meta: Optional[Sequence[dict]] = None,
                 generations: Optional[Iterable[int]] = None) -> None:
        self.global_indexes = _index_list(global_indexes)
        n = len(self.global_indexes)
        if isinstance(partition_ids, str):
            raise TypeError(f"partition_ids must be a list with one partition id per sample, got {partition_ids!r}")
        self.partition_ids = check_names(partition_ids, "partition_ids")
        if len(self.partition_ids) != n:
            raise ValueError(f"Length mismatch: global_indexes has {n}, partition_ids has {len(self.partition_ids)}")
        self.field_schema = _checked_schema(field_schema, n)
        self.production_status, self._field_status = _checked_status(production_status, n, self.field_schema)
        if extra_info is not None and not isinstance(extra_info, Mapping):
            raise TypeError(f"extra_info must be a dict, got {type(extra_info).__name__}")
        self.extra_info = dict(extra_info or {})
        self._custom_meta = _dict_list(custom_meta, n, "custom_meta")
        self._encoded_meta = None
        self._backend_meta = None if not _custom_backend_meta else _dict_list(
            _custom_backend_meta, n, "_custom_backend_meta")
        self.generations = _generation_list(generations, n)

    # ---- construction ---------------------------------------------------
    @classmethod
    def empty(cls, extra_info: Optional[Mapping[str, Any]] = None) -> "BatchMeta":
        """A batch of no samples."""
        return cls(extra_info=extra_info)

    @classmethod
    def _of(cls, global_indexes, partition_ids, field_schema, production_status, extra_info, custom_meta=None,
            encoded_meta=None, backend_meta=None, field_status=None, generations=None) -> "BatchMeta":
        """A batch of parts that agree and belong to it alone, unchecked; one of
        custom_meta (dicts) and encoded_meta (bytes, uint32 offsets) is set."""
        meta = cls.__new__(cls)
        meta.global_indexes = global_indexes
        meta.generations = generations
        meta.partition_ids = partition_ids
        meta.field_schema = field_schema
        meta.production_status = production_status
        meta.extra_info = extra_info
        meta._custom_meta = custom_meta
        meta._encoded_meta = encoded_meta
        meta._backend_meta = backend_meta
        meta._field_status = field_status
        return meta

    @classmethod
    def _from_native(cls, native: dict, extra_info: Optional[Mapping[str, Any]] = None) -> "BatchMeta":
        """The engine's batch; extra_info (copied) in place of the engine's."""
        schema = native["field_schema"]
        return cls._of(native["global_indexes"], native["partition_ids"], schema, native["production_status"],
                       native["extra_info"] if extra_info is None else dict(extra_info),
                       encoded_meta=native["custom_meta_encoded"], field_status=(tuple(schema), native["field_status"]),
                       generations=native["generations"])

    def _to_native(self) -> dict:
        """For a put with this metadata. Not extra_info: it may hold any
        object (tensors, as in TransferQueue), and the engine would only echo it."""
        names = self.field_names  # sorted: the engine's order
        return {
            "global_indexes": self._index_array(),
            "generations": self._generation_array(),
            "partition_ids": self.partition_ids,
            "field_schema": {name: dict(entry, dtype=_dtype_name(entry.get("dtype")))
                             for name, entry in self.field_schema.items()},
            "field_status": self._field_produced(names),
            "custom_meta": self._custom_meta,
            "custom_meta_encoded": self._encoded_meta if self._custom_meta is None else None,
        }

    def _index_array(self) -> np.ndarray:
        """global_indexes as int64, for the engine."""
        return np.asarray(self.global_indexes, dtype=np.int64).reshape(-1)

    def _generation_array(self) -> Optional[np.ndarray]:
        """generations as uint64 for the engine (0: not known), None when there are none."""
        return None if self.generations is None else np.asarray(self.generations, dtype=np.uint64).reshape(-1)

    def _generations_at(self, positions: Sequence[int]) -> Optional[list[int]]:
        return None if self.generations is None else [self.generations[i] for i in positions]

    def _field_produced(self, names: Sequence[str]) -> np.ndarray:
        """(size, len(names)) bools: sample i has field names[j]. A field
        outside field_schema: no; a sample whose production_status is 1: yes;
        otherwise what the engine said, where it said anything."""
        n = self.size
        ready = np.asarray(self.production_status).reshape(-1) == 1
        out = np.zeros((n, len(names)), dtype=bool)
        known = self._field_status
        if known is not None and known[1].shape[0] != n:
            known = None
        column = {} if known is None else {name: j for j, name in enumerate(known[0])}
        for j, name in enumerate(names):
            if name in self.field_schema:
                out[:, j] = ready if name not in column else ready | known[1][:, column[name]]
        return out

    def _produced_fields(self) -> list[str]:
        """The fields every sample has."""
        names = self.field_names
        produced = self._field_produced(names).all(axis=0)
        return [name for name, done in zip(names, produced) if done]

    # ---- custom_meta --------------------------------------------------------
    @property
    def custom_meta(self) -> list[dict]:
        """One dict per sample."""
        if self._custom_meta is None:
            self._custom_meta = _decode(self._encoded_meta)
            self._encoded_meta = None
        return self._custom_meta

    @custom_meta.setter
    def custom_meta(self, value: Sequence[dict]) -> None:
        self._custom_meta, self._encoded_meta = _dict_list(value, self.size, "custom_meta"), None

    def _changed_custom_meta(self) -> Optional[list[dict]]:
        """custom_meta when a caller may have changed it since the engine sent
        it (it was decoded), else None."""
        return self._custom_meta

    def get_all_custom_meta(self) -> list[dict]:
        """A deep copy of custom_meta (an encoded batch decodes afresh and stays encoded)."""
        return _decode(self._encoded_meta) if self._custom_meta is None else copy.deepcopy(self._custom_meta)

    def update_custom_meta(self, custom_meta: Optional[Sequence[dict]]) -> None:
        """Merges one dict per sample into custom_meta (key by key); the
        controller learns it at the next put or set_custom_meta."""
        if custom_meta is None:
            return
        entries = _dict_list(custom_meta, self.size, "custom_meta", copy_entries=False, empty_is_none=False)
        for mine, entry in zip(self.custom_meta, entries):
            mine.update(entry)

    def clear_custom_meta(self) -> None:
        self._custom_meta, self._encoded_meta = [{} for _ in range(self.size)], None

    @property
    def _custom_backend_meta(self) -> list[dict]:
        """Per sample, storage-backend metadata (TransferQueue's; seqflow's
        storage needs none, so it is only carried along)."""
        if self._backend_meta is None:
            self._backend_meta = [{} for _ in range(self.size)]
        return self._backend_meta

    @_custom_backend_meta.setter
    def _custom_backend_meta(self, value: Sequence[dict]) -> None:
        self._backend_meta = _dict_list(value, self.size, "_custom_backend_meta")

    def _backend_meta_at(self, positions: list[int]) -> Optional[list[dict]]:
        return None if self._backend_meta is None else [copy.deepcopy(self._backend_meta[i]) for i in positions]

    # ---- extra_info -----------------------------------------------------------
    def get_extra_info(self, key: str, default: Any = None) -> Any:
        return self.extra_info.get(key, default)

    def set_extra_info(self, key: str, value: Any) -> None:
        self.extra_info[key] = value

    def get_all_extra_info(self) -> dict[str, Any]:
        """A deep copy of extra_info."""
        return copy.deepcopy(self.extra_info)

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
    def size(self) -> int:
        """Number of samples."""
        return len(self.global_indexes)

    def __len__(self) -> int:
        return self.size

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
    def samples(self) -> _SampleViewList:
        """Per-sample read-only views: samples[i].fields["x"], len(samples), iteration."""
        return _SampleViewList(self)

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
    def select_samples(self, sample_indices: Iterable[int]) -> "BatchMeta":
        """The samples at these positions (not global indexes) in [0, size), in this order."""
        at = _positions(sample_indices, self.size, "sample_indices")
        rows = np.asarray(at, dtype=np.intp)
        status = self._field_status
        return BatchMeta._of(
            [self.global_indexes[i] for i in at],
            [self.partition_ids[i] for i in at],
            _copy_schema(self.field_schema, at),
            np.asarray(self.production_status, dtype=np.int8)[rows],
            dict(self.extra_info),
            None if self._custom_meta is None else [copy.deepcopy(self._custom_meta[i]) for i in at],
            None if self._custom_meta is not None else _select_encoded(self._encoded_meta, at),
            self._backend_meta_at(at),
            None if status is None or status[1].shape[0] != self.size else (status[0], status[1][rows]),
            self._generations_at(at),
        )

    def select_fields(self, field_names: Iterable[str]) -> "BatchMeta":
        """The same samples with only those of these fields the batch has."""
        names = [field_names] if isinstance(field_names, str) else list(field_names)
        kept = [f for f in dict.fromkeys(names) if f in self.field_schema]
        backend = None if self._backend_meta is None else [
            {f: copy.deepcopy(v) for f, v in m.items() if f.startswith("_") or f in kept} for m in self._backend_meta]
        return BatchMeta._of(
            list(self.global_indexes),
            list(self.partition_ids),
            _copy_schema({f: self.field_schema[f] for f in kept}),
            np.array(self.production_status, dtype=np.int8),
            copy.deepcopy(self.extra_info),
            None if self._custom_meta is None else copy.deepcopy(self._custom_meta),
            self._encoded_meta,
            backend,
            None if self._field_status is None else (tuple(kept), self._field_produced(kept)),
            self._generations_at(range(self.size)),
        )

    def __getitem__(self, item) -> "BatchMeta":
        """meta[i]: a batch of sample i (negative counts from the end); meta[a:b:c]: those samples."""
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            if not -self.size <= item < self.size:
                raise IndexError(f"BatchMeta index {item} out of range for a batch of {self.size}")
            return self.select_samples([int(item) % self.size])
        if isinstance(item, slice):
            return self.select_samples(range(*item.indices(self.size)))
        raise TypeError(f"Indexing with {type(item)} is not supported; use an int or a slice")

    def chunk(self, chunks: int) -> list["BatchMeta"]:
        """`chunks` consecutive parts with sizes chunk_sizes(size, chunks)."""
        return [self.select_samples(range(a, b)) for a, b in _bounds(chunk_sizes(self.size, _check_chunks(chunks)))]

    def split(self, sizes: Sequence[int]) -> list["BatchMeta"]:
        """Consecutive parts of the given sizes (they must add up to size)."""
        if any(s < 0 for s in sizes) or sum(sizes) != self.size:
            raise ValueError(f"sizes {list(sizes)} must be >= 0 and add up to {self.size}")
        return [self.select_samples(range(a, b)) for a, b in _bounds(sizes)]

    def chunk_by_partition(self) -> list["BatchMeta"]:
        """One part per partition, in order of first appearance."""
        order: dict[str, list[int]] = {}
        for i, p in enumerate(self.partition_ids):
            order.setdefault(p, []).append(i)
        return [self.select_samples(at) for at in order.values()]

    def copy(self) -> "BatchMeta":
        """A deep copy (custom_meta still encoded stays so: the bytes are immutable)."""
        status = self._field_status
        return BatchMeta._of(
            list(self.global_indexes), list(self.partition_ids), _copy_schema(self.field_schema),
            np.array(self.production_status, dtype=np.int8), copy.deepcopy(self.extra_info),
            None if self._custom_meta is None else copy.deepcopy(self._custom_meta), self._encoded_meta,
            copy.deepcopy(self._backend_meta), None if status is None else (status[0], status[1].copy()),
            self._generations_at(range(self.size)))

    def reorder(self, indices: Sequence[int]) -> None:
        """Puts the samples in the order of these positions (a permutation of 0..size-1), in place."""
        indices = list(indices)
        if len(indices) != self.size:
            raise ValueError(f"Indices length {len(indices)} mismatch batch size {self.size}")
        if len(set(indices)) != self.size:
            raise ValueError(f"Indices contain duplicates: {indices}")
        other = self.select_samples(indices)
        self.global_indexes, self.partition_ids = other.global_indexes, other.partition_ids
        self.generations = other.generations
        self.production_status, self._field_status = other.production_status, other._field_status
        self._custom_meta, self._encoded_meta = other._custom_meta, other._encoded_meta
        self._backend_meta = other._backend_meta
        for name, entry in other.field_schema.items():
            if name in self.field_schema and "per_sample_shapes" in entry:
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
        names = parts[0].field_names
        if validate:
            for i, part in enumerate(parts):
                if part.field_names != names:
                    raise ValueError(
                        f"BatchMeta.concat: field_names mismatch at chunk[{i}]: expected {names}, got "
                        f"{part.field_names} (extra {sorted(set(part.field_names) - set(names))}, missing "
                        f"{sorted(set(names) - set(part.field_names))})")
            for name in names:
                dtypes = [_dtype_name(p.field_schema[name].get("dtype")) for p in parts]
                for i, dtype in enumerate(dtypes):
                    if dtype != dtypes[0]:
                        raise ValueError(f"Field {name!r} dtype mismatch in concat: chunk[0]={dtypes[0]}, "
                                         f"chunk[{i}]={dtype}")
        encoded = all(p._custom_meta is None for p in parts)
        with_status = any(p._field_status is not None for p in parts)
        with_backend = any(p._backend_meta is not None for p in parts)
        return cls._of(
            [i for p in parts for i in p.global_indexes],
            [i for p in parts for i in p.partition_ids],
            _concat_schema(parts),
            np.concatenate([np.asarray(p.production_status, dtype=np.int8).reshape(-1) for p in parts]),
            _merged_extra_info([p.extra_info for p in parts], "BatchMeta"),
            None if encoded else [copy.deepcopy(m) for p in parts for m in p.custom_meta],
            _concat_encoded([p._encoded_meta for p in parts]) if encoded else None,
            [copy.deepcopy(m) for p in parts for m in p._custom_backend_meta] if with_backend else None,
            (tuple(names), np.concatenate([p._field_produced(names) for p in parts])) if with_status else None,
            # 0 where a part has none: those samples are checked by partition only.
            None if all(p.generations is None for p in parts) else
            [g for p in parts for g in (p.generations if p.generations is not None else [0] * p.size)],
        )

    def union(self, other: Optional["BatchMeta"]) -> "BatchMeta":
        """The same samples with the fields of both: other's schema, extra_info
        and custom_meta keys win on a clash; a sample is produced when both say
        so. An empty side gives a copy of the other."""
        if not other:
            return self.copy()
        if self.size == 0:
            return other.copy()
        if list(self.global_indexes) != list(other.global_indexes):
            raise ValueError(f"BatchMeta.union: global_indexes do not match: self.global_indexes="
                             f"{self.global_indexes}, other.global_indexes={other.global_indexes}")
        if list(self.partition_ids) != list(other.partition_ids):
            raise ValueError(f"BatchMeta.union: partition_ids do not match: self.partition_ids="
                             f"{self.partition_ids}, other.partition_ids={other.partition_ids}")
        generations = self.generations if self.generations is not None else other.generations
        if self.generations is not None and other.generations is not None and \
                list(self.generations) != list(other.generations):
            raise ValueError(f"BatchMeta.union: generations do not match (one side is stale): self.generations="
                             f"{self.generations}, other.generations={other.generations}")
        schema = _copy_schema(self.field_schema)
        schema.update(_copy_schema(other.field_schema))
        status = None
        if self._field_status is not None or other._field_status is not None:
            names = tuple(schema)
            mine, theirs = self._field_produced(names), other._field_produced(names)
            status = (names, np.where([n in other.field_schema for n in names], theirs, mine))
        backend = None
        if self._backend_meta is not None or other._backend_meta is not None:
            backend = [dict(copy.deepcopy(a), **copy.deepcopy(b))
                       for a, b in zip(self._custom_backend_meta, other._custom_backend_meta)]
        return BatchMeta._of(
            list(self.global_indexes), list(self.partition_ids), schema,
            np.bitwise_and(np.asarray(self.production_status, dtype=np.int8),
                           np.asarray(other.production_status, dtype=np.int8)),
            {**self.extra_info, **other.extra_info},
            [dict(copy.deepcopy(a), **copy.deepcopy(b)) for a, b in zip(self.custom_meta, other.custom_meta)],
            None, backend, status, None if generations is None else list(generations))

    def add_fields(self, tensor_dict, set_all_ready: bool = True) -> "BatchMeta":
        """Adds the fields of a TensorDict (or dict of fields) with one row per
        sample to field_schema, in place; with set_all_ready every sample
        becomes produced. Returns self."""
        rows, schema = _schema_of(tensor_dict)
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
        # Private layout: the slots in order (encoded custom_meta stays encoded).
        return tuple(getattr(self, slot) for slot in self.__slots__)

    def __setstate__(self, state) -> None:
        self.generations = None  # a pickle from before generations
        for slot, value in zip(self.__slots__, state):
            # Ray's zero-copy deserialisation gives read-only arrays; add_fields writes.
            if slot == "production_status" and isinstance(value, np.ndarray) and not value.flags.writeable:
                value = value.copy()
            setattr(self, slot, value)

    def __str__(self) -> str:
        return (f"BatchMeta(size={self.size}, field_names={self.field_names}, is_ready={self.is_ready}, "
                f"global_indexes={self.global_indexes}, extra_info={self.extra_info})")

    def __repr__(self) -> str:
        shown = list(self.global_indexes[:8])
        more = "..." if self.size > 8 else ""
        return (f"BatchMeta(size={self.size}, global_indexes={shown}{more}, field_names={self.field_names}, "
                f"is_ready={self.is_ready})")


def _index_list(values) -> list[int]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"global_indexes must be a list of integers, got {values!r}")
    array = np.asarray(values if isinstance(values, np.ndarray) else list(values))
    if array.size and (array.ndim != 1 or array.dtype.kind not in "iu"):
        raise TypeError(f"global_indexes must be a list of integers, got {values!r}")
    if array.size and array.dtype.kind == "u" and array.max() > INT64_MAX:
        raise ValueError(f"global_indexes has values beyond the int64 range, got {values!r}")
    return array.astype(np.int64).tolist() if array.size else []


def _generation_list(values, n: int) -> Optional[list[int]]:
    if values is None:
        return None
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"generations must be None or a list of integers, got {values!r}")
    out = list(values)
    if len(out) != n:
        raise ValueError(f"Length mismatch: global_indexes has {n}, generations has {len(out)}")
    for i, value in enumerate(out):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value < 2 ** 64:
            raise TypeError(f"generations[{i}] must be an integer in [0, 2**64), got {value!r}")
    return [int(v) for v in out]


def _checked_schema(field_schema, n: int) -> dict:
    if field_schema is None:
        return {}
    if not isinstance(field_schema, Mapping):
        raise TypeError(f"field_schema must be a dict of field name to dict, got {type(field_schema).__name__}")
    for name, entry in field_schema.items():
        check_name(name, "field_schema key")
        if not isinstance(entry, Mapping):
            raise TypeError(f"field_schema[{name!r}] must be a dict, got {type(entry).__name__}")
        shapes = entry.get("per_sample_shapes")
        if shapes is not None and len(shapes) != n:
            raise ValueError(f"Field {name!r} per_sample_shapes length {len(shapes)} != batch_size {n}")
    return _copy_schema({name: dict(entry) for name, entry in field_schema.items()})


def _checked_status(production_status, n: int, schema: dict) -> tuple[np.ndarray, Optional[tuple]]:
    """(one int8 per sample, per-field matrix or None). A (samples x fields)
    bool matrix in field_schema order gives both."""
    if production_status is None:
        return np.zeros(n, dtype=np.int8), None
    status = np.array(production_status, copy=True)
    if status.ndim == 2 and status.shape == (n, len(schema)):
        matrix = status.astype(bool)
        return (matrix.all(axis=1) & (matrix.shape[1] > 0)).astype(np.int8), (tuple(schema), matrix)
    if status.ndim != 1 or len(status) != n:
        raise ValueError(f"production_status length {len(status) if status.ndim else 'n/a'} != batch_size {n} "
                         f"(give one value per sample, or a samples x fields matrix)")
    return status.astype(np.int8), None


def _dict_list(values, n: int, name: str, copy_entries: bool = True, empty_is_none: bool = True) -> list[dict]:
    """One dict per sample (empty ones for None, and for [] unless not
    empty_is_none); ValueError / TypeError naming `name`."""
    if values is None or (empty_is_none and isinstance(values, (list, tuple)) and not values):
        return [{} for _ in range(n)]
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a list of dicts, one per sample, got {type(values).__name__}")
    values = list(values)
    if len(values) != n:
        raise ValueError(f"{name} length {len(values)} != batch_size {n}")
    for i, entry in enumerate(values):
        if not isinstance(entry, Mapping):
            raise TypeError(f"{name}[{i}] must be a dict, got {type(entry).__name__}")
    return [dict(entry) for entry in values] if copy_entries else values


def _concat_schema(parts: list[BatchMeta]) -> dict:
    """The first part's schema; a field nested in any part is nested, and
    per_sample_shapes are joined when any part has them."""
    out = {}
    for name, entry in parts[0].field_schema.items():
        entries = [p.field_schema.get(name, {}) for p in parts]
        nested = any(e.get("is_nested", False) for e in entries)
        merged = copy.deepcopy(entry)
        merged["is_nested"] = nested
        shapes = [e.get("shape") for e in entries]
        if any(e.get("per_sample_shapes") is not None for e in entries):
            shapes = merged["per_sample_shapes"] = [
                s for e, p in zip(entries, parts)
                for s in (e.get("per_sample_shapes") if e.get("per_sample_shapes") is not None
                          else [e.get("shape")] * p.size)]
        if nested:
            merged["shape"] = _common_shape(shapes) if all(isinstance(s, tuple) for s in shapes) else None
        out[name] = merged
    return out


@dataclasses.dataclass
class KVBatchMeta:
    """What a kv put returns: the keys, their tags (one dict per key) and,
    optionally, their partition, the fields they hold and batch-level extra_info."""

    keys: list[str] = dataclasses.field(default_factory=list)
    tags: list[dict] = dataclasses.field(default_factory=list)
    partition_id: Optional[str] = None
    fields: Optional[list[str]] = None
    extra_info: Optional[dict[str, Any]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self._validate()
        check_names(self.keys, "keys")
        check_optional_name(self.partition_id, "partition_id")
        if self.fields is not None:
            check_names(self.fields, "fields")
        # Copies, so that chunks and concatenations share nothing.
        self.tags = copy.deepcopy(self.tags)
        self.extra_info = copy.deepcopy(self.extra_info)

    @classmethod
    def _of_owned(cls, keys, tags, partition_id, fields, extra_info) -> "KVBatchMeta":
        """One over lists made for it alone (a kv put's reply): validated,
        not copied again (deep copies of 100k tags cost more than the put)."""
        meta = cls.__new__(cls)
        meta.keys, meta.tags, meta.partition_id, meta.fields, meta.extra_info = (
            keys, tags, partition_id, fields, extra_info)
        meta._validate()
        return meta

    def _validate(self) -> None:
        for name in ("keys", "tags"):
            value = getattr(self, name)
            if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
                raise TypeError(f"{name} must be a list, got {value!r}")
        self.keys, self.tags = list(self.keys), list(self.tags)
        if len(self.keys) != len(self.tags):
            raise ValueError(f"keys and tags must have same length, but got {len(self.keys)} and {len(self.tags)}")
        if len(set(self.keys)) != len(self.keys):
            duplicated = sorted({k for k in self.keys if self.keys.count(k) > 1})
            raise ValueError(f"Got duplicated keys: {duplicated}")
        if self.fields is not None:
            if isinstance(self.fields, str):
                raise TypeError(f"fields must be a list of field names, got {self.fields!r}")
            self.fields = list(self.fields)
            if len(set(self.fields)) != len(self.fields):
                raise ValueError(f"Got duplicated fields: {self.fields}")

    @property
    def size(self) -> int:
        return len(self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    def __str__(self) -> str:
        return f"KVBatchMeta(size={self.size}, field_names={self.fields}, extra_info={self.extra_info})"

    def _part(self, positions: Sequence[int], keys: Optional[list[str]] = None) -> "KVBatchMeta":
        return KVBatchMeta(keys=[self.keys[i] for i in positions] if keys is None else keys,
                           tags=[self.tags[i] for i in positions], partition_id=self.partition_id,
                           fields=self.fields, extra_info=self.extra_info)

    def select_keys(self, keys_to_select: Sequence[str]) -> "KVBatchMeta":
        """These keys (in this order) with their tags; ValueError on a
        duplicate, RuntimeError on a key the batch lacks."""
        keys = list(keys_to_select)
        if len(set(keys)) != len(keys):
            raise ValueError(f"Contain duplicate keys: {keys}")
        position = {key: i for i, key in enumerate(self.keys)}
        missing = [k for k in keys if k not in position]
        if missing:
            raise RuntimeError(f"Keys {missing} not found in current batch.")
        return self._part([position[k] for k in keys], keys)

    def reorder(self, indexes: Sequence[int]) -> None:
        """Puts the samples in the order of these positions (a permutation), in place."""
        indexes = list(indexes)
        if len(indexes) != self.size:
            raise ValueError(f"Attempted to reorder with indexes length {len(indexes)} that does not match "
                             f"the batch size {self.size}.")
        if len(set(indexes)) != len(indexes):
            raise ValueError(f"Contain duplicate indexes: {indexes}")
        at = _positions(indexes, self.size, "indexes")
        self.keys = [self.keys[i] for i in at]
        self.tags = [self.tags[i] for i in at]

    def chunk(self, chunks: int) -> list["KVBatchMeta"]:
        """`chunks` consecutive parts with sizes chunk_sizes(size, chunks)."""
        return [self._part(range(a, b)) for a, b in _bounds(chunk_sizes(self.size, _check_chunks(chunks)))]

    @classmethod
    def concat(cls, data: Sequence[Optional["KVBatchMeta"]]) -> "KVBatchMeta":
        """The keys of all batches, in order (empty ones and None skipped); all
        must share the partition and the set of fields. extra_info: the union;
        a key with two values raises ValueError."""
        parts = [m for m in (data or []) if m is not None and m.size > 0]
        if not parts:
            return cls()
        fields, partition_id = parts[0].fields, parts[0].partition_id
        for i, part in enumerate(parts):
            if part.fields is not None and set(part.fields) != set(fields or ()):
                raise ValueError(f"Field names do not match for concatenation: chunk[0] has {fields}, "
                                 f"chunk[{i}] {part.fields}")
            if part.partition_id != partition_id:
                raise ValueError(f"Partition do not match for concatenation: chunk[0] is {partition_id!r}, "
                                 f"chunk[{i}] {part.partition_id!r}")
        return cls(keys=[k for p in parts for k in p.keys], tags=[t for p in parts for t in p.tags],
                   partition_id=partition_id, fields=fields,
                   extra_info=_merged_extra_info([p.extra_info or {} for p in parts], "KVBatchMeta"))
