"""KVBatchMeta: what a kv put returns. A dataclass, as TransferQueue 0.1.11's
(dataclasses.fields / asdict / replace and == work), with its methods and
messages."""

from __future__ import annotations

import copy
import dataclasses
import operator
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from seqflow import _seqflow
from seqflow._checks import check_names, check_optional_name, check_parts
from seqflow._extra_info import merged_extra_info


def _has_duplicates(values: list[Any]) -> bool:
    return len(set(values)) != len(values)


def _listed(value: Any, name: str) -> list[Any]:
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be a list, got {value!r}")
    return list(value)


def _positions(given: list[Any], size: int) -> list[int]:
    """`given` (integers) as positions in [0, size)."""
    try:
        at = [operator.index(i) for i in given]
    except TypeError:
        raise ValueError(f"indexes must be a list of integer positions, got {given!r}") from None
    if given and all(isinstance(i, bool) for i in given):  # numpy would read them as a mask
        raise ValueError(f"indexes must be a list of integer positions, got {given!r}")
    if not all(0 <= i < size for i in at):
        raise ValueError(f"indexes must lie in [0, {size}), got {at!r}")
    return at


@dataclasses.dataclass
class KVBatchMeta:
    """The keys, their tags (one dict per key) and, optionally, their
    partition, the fields they hold and batch-level extra_info."""

    keys: list[str] = dataclasses.field(default_factory=list)
    tags: list[dict] = dataclasses.field(default_factory=list)
    partition_id: Optional[str] = None
    fields: Optional[list[str]] = None
    extra_info: Optional[dict[str, Any]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        """Checks keys (one tag each, no key twice, the name rule),
        partition_id and fields (no field twice), and copies tags and
        extra_info, so that chunks and concatenations share nothing."""
        self._validate()
        check_names(self.keys, "keys")
        check_optional_name(self.partition_id, "partition_id")
        if self.fields is not None:
            check_names(self.fields, "fields")
        self.tags = copy.deepcopy(self.tags)
        self.extra_info = copy.deepcopy(self.extra_info)

    def _validate(self) -> None:
        """keys, tags and fields as lists: one tag per key, no key or field twice."""
        keys, tags = _listed(self.keys, "keys"), _listed(self.tags, "tags")
        if len(keys) != len(tags):
            raise ValueError(f"keys and tags must have same length, but got {len(keys)} and {len(tags)}")
        if _has_duplicates(keys):
            raise ValueError(f"Got duplicated keys: {sorted({key for key in keys if keys.count(key) > 1})!r}")
        fields = self.fields
        if fields is not None:
            if isinstance(fields, str):
                raise TypeError(f"fields must be a list of field names, got {fields!r}")
            fields = list(fields)
            if _has_duplicates(fields):
                raise ValueError(f"Got duplicated fields: {fields!r}")
        self.keys, self.tags, self.fields = keys, tags, fields

    @classmethod
    def _of_owned(cls, keys: list[str], tags: list[dict], partition_id: Optional[str], fields: Optional[list[str]],
                  extra_info: Optional[dict[str, Any]]) -> KVBatchMeta:
        """One over lists made for it alone (a kv put's reply): validated, not
        copied again (deep copies of 100k tags cost more than the put)."""
        meta = cls.__new__(cls)
        meta.keys, meta.tags, meta.partition_id, meta.fields, meta.extra_info = (keys, tags, partition_id, fields,
                                                                                 extra_info)
        meta._validate()
        return meta

    @property
    def size(self) -> int:
        """The number of keys."""
        return len(self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    def __str__(self) -> str:
        return f"KVBatchMeta(size={self.size}, field_names={self.fields}, extra_info={self.extra_info})"

    def _part(self, at: Iterable[int], keys: Optional[list[str]] = None) -> KVBatchMeta:
        """A new batch of these positions' tags (and keys, unless given), the
        rest shared (the constructor copies)."""
        at = list(at)
        return type(self)(keys=[self.keys[i] for i in at] if keys is None else keys,
                          tags=[self.tags[i] for i in at], partition_id=self.partition_id, fields=self.fields,
                          extra_info=self.extra_info)

    def select_keys(self, keys_to_select: Iterable[str]) -> KVBatchMeta:
        """These keys (in this order) with their tags; ValueError on a
        duplicate, RuntimeError on a key the batch lacks."""
        wanted = list(keys_to_select)
        if _has_duplicates(wanted):
            raise ValueError(f"Contain duplicate keys: {wanted!r}")
        position = {key: i for i, key in enumerate(self.keys)}
        missing = [key for key in wanted if key not in position]
        if missing:
            raise RuntimeError(f"Keys {missing!r} not found in current batch.")
        return self._part([position[key] for key in wanted], wanted)

    def reorder(self, indexes: Iterable[int]) -> None:
        """Puts the samples in the order of these positions (a permutation), in place."""
        given = list(indexes)
        if len(given) != self.size:
            raise ValueError(f"Attempted to reorder with indexes length {len(given)} that does not match the batch "
                             f"size {self.size}.")
        if _has_duplicates(given):
            raise ValueError(f"Contain duplicate indexes: {given}")
        at = _positions(given, self.size)
        self.keys, self.tags = [self.keys[i] for i in at], [self.tags[i] for i in at]

    def chunk(self, chunks: int) -> list[KVBatchMeta]:
        """`chunks` consecutive parts with sizes chunk_sizes(size, chunks)."""
        out: list[KVBatchMeta] = []
        begin = 0
        for count in _seqflow.chunk_sizes(self.size, check_parts(chunks, "chunks")):
            out.append(self._part(range(begin, begin + count)))
            begin += count
        return out

    @classmethod
    def concat(cls, data: Optional[Iterable[Optional[KVBatchMeta]]]) -> KVBatchMeta:
        """The keys of all batches, in order (empty ones and None skipped);
        all must share the partition and the set of fields. extra_info: the
        union; a key with two values raises ValueError."""
        parts = [meta for meta in data if meta is not None and meta.size > 0] if data else []
        if not parts:
            return cls()
        first = parts[0]
        for i, part in enumerate(parts):
            if part.fields is not None and set(part.fields) != set(first.fields or ()):
                raise ValueError(f"Field names do not match for concatenation: chunk[0] has {first.fields}, "
                                 f"chunk[{i}] {part.fields}")
            if not part.partition_id == first.partition_id:
                raise ValueError(f"Partition do not match for concatenation: chunk[0] is {first.partition_id!r}, "
                                 f"chunk[{i}] {part.partition_id!r}")
        return cls(keys=[key for part in parts for key in part.keys], tags=[tag for part in parts for tag in part.tags],
                   partition_id=first.partition_id, fields=first.fields,
                   extra_info=merged_extra_info([part.extra_info or {} for part in parts], "KVBatchMeta"))
