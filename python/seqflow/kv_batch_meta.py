"""KVBatchMeta: what a kv put returns (keys, their tags, the partition, the
fields and extra_info), with TransferQueue 0.1.11's methods."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence

from seqflow import _seqflow
from seqflow._checks import bounds, check_names, check_optional_name, positions

chunk_sizes = _seqflow.chunk_sizes
_arguments = _seqflow.kv_batch_meta_arguments


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
        self.tags = _seqflow.deep_copy(self.tags)
        self.extra_info = _seqflow.deep_copy(self.extra_info)

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
        self.keys, self.tags, self.fields = _arguments.validated(self.keys, self.tags, self.fields)

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
        return self._part(*_arguments.key_positions(self.keys, keys_to_select))

    def reorder(self, indexes: Sequence[int]) -> None:
        """Puts the samples in the order of these positions (a permutation), in place."""
        indexes = list(indexes)
        if len(indexes) != self.size:
            raise ValueError(f"Attempted to reorder with indexes length {len(indexes)} that does not match "
                             f"the batch size {self.size}.")
        if len(set(indexes)) != len(indexes):
            raise ValueError(f"Contain duplicate indexes: {indexes}")
        at = positions(indexes, self.size, "indexes")
        self.keys = [self.keys[i] for i in at]
        self.tags = [self.tags[i] for i in at]

    def chunk(self, chunks: int) -> list["KVBatchMeta"]:
        """`chunks` consecutive parts with sizes chunk_sizes(size, chunks)."""
        return [self._part(range(a, b)) for a, b in bounds(chunk_sizes(self.size, _seqflow.check_chunks(chunks)))]

    @classmethod
    def concat(cls, data: Sequence[Optional["KVBatchMeta"]]) -> "KVBatchMeta":
        """The keys of all batches, in order (empty ones and None skipped); all
        must share the partition and the set of fields. extra_info: the union;
        a key with two values raises ValueError."""
        parts = [m for m in (data or []) if m is not None and m.size > 0]
        if not parts:
            return cls()
        _arguments.check_joinable(parts)
        return cls(keys=[k for p in parts for k in p.keys], tags=[t for p in parts for t in p.tags],
                   partition_id=parts[0].partition_id, fields=parts[0].fields,
                   extra_info=_seqflow.merged_extra_info([p.extra_info or {} for p in parts], "KVBatchMeta"))
