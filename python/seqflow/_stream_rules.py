"""The rules of one data-parallel rank's stream of batches (StreamingDataset
follows them; docs/streaming.md documents them):

- streaming mode never ends: when nothing is ready the rank sleeps and asks again.
- finite mode ends once production is complete (production_complete) and the
  task consumed every produced sample. Once production is complete, a rank
  whose full batch cannot fill asks for what is left, so the short last batch
  comes out (8 samples in batches of 3: 3, 3, 2); with drop_last it is not
  fetched and the rank ends (fetch_after_production).
- a rank that has waited long for a batch warns once (StallWatch) if, as
  things stand, the batch cannot come (stall_reason).
- with W workers, worker w handles batch indexes w, w+W, w+2W, ...
  (check_worker_share): no two workers of a rank fetch the same batch.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from seqflow import _seqflow


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_int_at_least(value: Any, name: str, minimum: int) -> None:
    if not _is_int(value) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


@dataclass(frozen=True)
class StreamArguments:
    data_fields: list[str]
    empty_batch_sleep: float
    warn_after_seconds: float


def check_stream_arguments(batch_size, micro_batch_size, dp_rank, data_fields, partition_id, task_name,
                           empty_batch_sleep, total_samples, drop_last, warn_after_seconds) -> StreamArguments:
    """StreamingDataset's arguments checked, with TransferQueue's words
    ("must be an integer >= 1"); data_fields as a list, the seconds as floats."""
    check_int_at_least(batch_size, "batch_size", 1)
    check_int_at_least(micro_batch_size, "micro_batch_size", 1)
    check_int_at_least(dp_rank, "dp_rank", 0)
    fields = [data_fields] if isinstance(data_fields, str) else list(data_fields)
    if not fields:
        raise ValueError("data_fields must name at least one field")
    if not partition_id or not task_name:
        raise ValueError(f"partition_id and task_name are required, got {partition_id!r} and {task_name!r}")
    if not empty_batch_sleep >= 0:
        raise ValueError(f"empty_batch_sleep must be >= 0 seconds, got {empty_batch_sleep!r}")
    if total_samples is not None and (not _is_int(total_samples) or total_samples < 1):
        raise ValueError(f"total_samples must be an integer >= 1 or None, got {total_samples!r}")
    if not isinstance(drop_last, bool):
        raise ValueError(f"drop_last must be True or False, got {drop_last!r}")
    is_number = isinstance(warn_after_seconds, (int, float)) and not isinstance(warn_after_seconds, bool)
    if not is_number or not warn_after_seconds > 0:  # `not >` also refuses nan
        raise ValueError(f"warn_after_seconds must be a number > 0, got {warn_after_seconds!r}")
    return StreamArguments(fields, float(empty_batch_sleep), float(warn_after_seconds))


def check_worker_share(worker: int, workers: int) -> None:
    """Worker `worker` of `workers` handles batch indexes worker, worker +
    workers, ...: no two workers of a rank fetch the same batch."""
    if not (_is_int(worker) and _is_int(workers)) or workers < 1 or not 0 <= worker < workers:
        raise ValueError(f"worker must be in [0, workers), got worker {worker!r} of {workers!r}")


def micro_batch_sizes(rows: int, micro_batch_size: Any) -> list[int]:
    """ceil(rows / micro_batch_size) micro-batch sizes chunk_sizes(rows, k)
    (7 rows at 3 -> 3, 2, 2); none for no rows."""
    check_int_at_least(micro_batch_size, "micro_batch_size", 1)
    if rows <= 0:
        return []
    return list(_seqflow.chunk_sizes(rows, math.ceil(rows / min(int(micro_batch_size), rows))))


def production_complete(produced: np.ndarray, total_samples: Optional[int]) -> bool:
    """total_samples samples hold every requested field, or, without
    total_samples, every sample of the partition does (and it has one).
    produced: the flags of get_production_status."""
    produced = np.asarray(produced, dtype=bool)
    if total_samples is not None:
        return int(produced.sum()) >= total_samples
    return produced.size > 0 and bool(produced.all())


def left_to_consume(indexes, produced, consumed_indexes, consumed) -> int:
    """Produced samples the task has not consumed (get_production_status and
    get_consumption_status answers)."""
    indexes, produced = np.asarray(indexes, dtype=np.int64), np.asarray(produced, dtype=bool)
    consumed_indexes, consumed = np.asarray(consumed_indexes, dtype=np.int64), np.asarray(consumed, dtype=bool)
    if indexes.shape != produced.shape or consumed_indexes.shape != consumed.shape:
        raise ValueError(f"left_to_consume: one flag per index, got {indexes.size} indexes and {produced.size} "
                         f"produced flags, {consumed_indexes.size} consumed indexes and {consumed.size} consumed flags")
    ready = np.unique(indexes[produced])
    return int(np.count_nonzero(~np.isin(ready, consumed_indexes[consumed])))


@dataclass(frozen=True)
class LastFetch:
    """The fetch to make once production is complete: no sample becomes
    ready any more, so what is left is all the rank can still get."""
    batch_size: int
    # An empty answer ends the rank. Else another rank took the samples
    # meanwhile, or the sampler serves no batch that short: ask again.
    ends_if_empty: bool


def fetch_after_production(batch_size: int, drop_last: bool, left: int) -> LastFetch:
    ends = drop_last or left == 0
    return LastFetch(batch_size if ends else min(batch_size, left), ends)


def stall_reason(fields: Sequence[str], produced, left: Optional[int]) -> Optional[str]:
    """Why a batch waited for cannot come as things stand, or None (producers
    may simply be slow). produced: get_production_status(per_field=True) flags
    (samples x fields), None or empty when the partition has no sample yet;
    left: samples left to consume once production is complete (finite mode)."""
    if produced is None or len(produced) == 0:
        return None
    has_field = np.asarray(produced, dtype=bool).any(axis=0)
    if has_field.size != len(fields):
        raise ValueError(f"stall_reason: {len(fields)} fields but {has_field.size} flags")
    missing = [field for field, has in zip(fields, has_field) if not has]
    if missing:
        names = ", ".join(f"'{field}'" for field in missing)
        return f"no sample of the partition has field(s) {names}; check the names against what the producers put"
    if left:
        return (f"production is complete, but the sampler serves no batch of the {left} sample(s) left "
                "(with drop_last=True the stream ends without them)")
    return None


class StallWatch:
    """When a stream that fetched nothing checks why: after waiting `seconds`
    for a batch, on each empty fetch until it has warned once."""

    def __init__(self, seconds: float, clock=time.monotonic):
        self._after = seconds
        self._clock = clock
        self._waiting_since: Optional[float] = None
        self._warned = False

    def empty_fetch(self) -> bool:
        """A fetch came back empty: True when the stream should check why."""
        now = self._clock()
        if self._waiting_since is None:
            self._waiting_since = now
        return not self._warned and now - self._waiting_since >= self._after

    def batch_came(self) -> None:
        self._waiting_since = None

    def warned(self) -> None:
        self._warned = True
