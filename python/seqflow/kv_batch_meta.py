"""KVBatchMeta: what a kv put returns. A dataclass, as TransferQueue 0.1.11's
(dataclasses.fields / asdict / replace and == work); its methods are C++
(python/bindings/kv_batch_meta.cc)."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from seqflow import _seqflow

_methods = _seqflow.kv_batch_meta


@dataclasses.dataclass
class KVBatchMeta:
    """The keys, their tags (one dict per key) and, optionally, their
    partition, the fields they hold and batch-level extra_info."""

    keys: list[str] = dataclasses.field(default_factory=list)
    tags: list[dict] = dataclasses.field(default_factory=list)
    partition_id: Optional[str] = None
    fields: Optional[list[str]] = None
    extra_info: Optional[dict[str, Any]] = dataclasses.field(default_factory=dict)

    __post_init__, __len__, __str__ = _methods.post_init, _methods.size, _methods.text
    size = property(_methods.size, doc="The number of keys.")
    select_keys, reorder, chunk = _methods.select_keys, _methods.reorder, _methods.chunk
    concat, _of_owned = classmethod(_methods.concat), classmethod(_methods.of_owned)
