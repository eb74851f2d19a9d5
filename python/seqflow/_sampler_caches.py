"""The samplers' caches in TransferQueue's layouts:
`_states[partition_id][task_name][dp_rank][batch_index]` (a Python sampler's
own dict, or a built-in sampler's C++ reservations shown that way) and
SeqlenBalancedSampler's `_balanced_cache`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

import numpy as np


def _cached_answer(entry: Any) -> Optional[list[int]]:
    """The sampled indexes of a cached `_states` entry: a list of indexes, or
    a (sampled, consumed) pair as TransferQueue's samplers store them; None
    otherwise."""
    if isinstance(entry, tuple) and len(entry) == 2:
        entry = entry[0]
    if not isinstance(entry, list) or not all(isinstance(i, (int, np.integer)) for i in entry):
        return None
    return [int(i) for i in entry]


def _child(node: Any, key: Any) -> Any:
    return node.get(key) if isinstance(node, dict) else None


def cached(states: Any, partition_id: Any, task_name: Any, sampling_config: dict) -> Optional[list[int]]:
    """The answer `states` holds for this caller's (dp_rank, batch_index), or None."""
    dp_rank = sampling_config.get("dp_rank")
    if dp_rank is None:
        return None
    by_batch = _child(_child(_child(states, partition_id), task_name), dp_rank)
    batch_index = sampling_config.get("batch_index")
    if not isinstance(by_batch, dict) or batch_index not in by_batch:
        return None
    return _cached_answer(by_batch[batch_index])


def _shares(state: dict) -> Iterator[tuple[tuple[Any, Any, Any], Any, list[int]]]:
    """((partition_id, task_name, batch_index), dp_rank, samples) of each
    share a built-in sampler's state() reserves, by batch, then by rank."""
    for batch in state.get("reservations", []):
        key = (batch["partition_id"], batch["task_name"], batch["batch_index"])
        for share in sorted(batch["ranks"], key=lambda share: int(share["dp_rank"])):
            yield key, share["dp_rank"], list(share["samples"])


def reservation_states(state: dict, pairs: bool) -> dict:
    """A built-in sampler's state() reservations in `_states`' layout;
    entries are (sampled, consumed) pairs when `pairs`, else the sampled list."""
    states: dict = {}
    for (partition_id, task_name, batch_index), dp_rank, samples in _shares(state):
        by_batch = states.setdefault(partition_id, {}).setdefault(task_name, {}).setdefault(dp_rank, {})
        by_batch[batch_index] = (samples, list(samples)) if pairs else samples
    return states


def reservation_cache(state: dict) -> dict:
    """{(partition_id, task_name, batch_index): [samples of rank 0, rank 1, ...]}."""
    cache: dict = {}
    for key, _, samples in _shares(state):
        cache.setdefault(key, []).append(samples)
    return cache
