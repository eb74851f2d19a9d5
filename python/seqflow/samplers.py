"""Samplers: which ready samples one caller (one DP rank) gets.

The built-in samplers are the C++ ones (they run inside the controller, under
its lock, without Python). A Python subclass of BaseSampler works too, as in
TransferQueue: implement ``sample(ready_indexes, batch_size, **kwargs) ->
(sampled, consumed)``. The keyword arguments are ``dp_rank``, ``batch_index``,
``task_name``, ``partition_id`` and ``sample_info`` (read custom metadata:
``sample_info.custom_meta(gi)``, ``sample_info.length(gi)``,
``sample_info.group_key(gi, n)``; valid during the call only). Optional hooks:
``reserved(partition_id, task_name, sampling_config)`` returns an answer kept
for that caller (or None), ``clear(partition_id, task_name)`` forgets state,
``state()`` / ``restore(state)`` take part in checkpoints (JSON-like values).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from seqflow import _seqflow
from seqflow._arrays import as_int64_array

_native = _seqflow.client

__all__ = [
    "BaseSampler",
    "GRPOGroupNSampler",
    "RankAwareSampler",
    "SeqlenBalancedSampler",
    "SequentialSampler",
    "TokenBudgetSampler",
    "native_sampler",
]


def _positive(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


class BaseSampler:
    """Base of all samplers. Subclass it and implement sample()."""

    def __init__(self):
        self._states: dict[Any, Any] = {}

    def sample(self, ready_indexes, batch_size: int, *args, **kwargs) -> tuple[list[int], list[int]]:
        raise NotImplementedError("Subclasses must implement sample")

    def __call__(self, *args, **kwargs):
        return self.sample(*args, **kwargs)

    def reserved(self, partition_id: str, task_name: str, sampling_config: dict) -> Optional[list[int]]:
        """An answer already kept for this caller, served even when too little is ready."""
        return None

    def clear(self, partition_id: str, task_name: Optional[str] = None) -> None:
        """Forgets the state of a partition (or of one task in it)."""
        if task_name is None:
            self._states.pop(partition_id, None)
        else:
            self._states.get(partition_id, {}).pop(task_name, None)

    def clear_cache(self, partition_id: str) -> None:
        """TransferQueue's name for clear(partition_id)."""
        self.clear(partition_id)

    def state(self):
        return {}

    def restore(self, state) -> None:
        pass

    def _native_handle(self):
        """The C++ sampler the controller calls."""
        return _native.python_sampler(self)


class _NativeSampler(BaseSampler):
    """A built-in sampler: a handle to the C++ implementation."""

    def __init__(self, native):
        super().__init__()
        self._native = native

    def _native_handle(self):
        return self._native

    @property
    def name(self) -> str:
        return self._native.name

    def sample(self, ready_indexes, batch_size: int, *args, partition_id: str = "", task_name: str = "",
               dp_rank: int = 0, batch_index: int = 0, custom_meta: Optional[dict] = None, **kwargs):
        """Runs the sampler outside any client (for tests and tools): custom_meta
        maps global index to its dict. Do not call it while a client uses this
        sampler."""
        ready = as_int64_array(list(ready_indexes) if not isinstance(ready_indexes, np.ndarray) else ready_indexes,
                               "ready_indexes")
        sampled, consumed = _native.run_sampler(self._native, ready, int(batch_size), partition_id, task_name,
                                                int(dp_rank), int(batch_index), dict(custom_meta or {}))
        return sampled.tolist(), consumed.tolist()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class SequentialSampler(_NativeSampler):
    """The first batch_size ready samples, oldest first."""

    def __init__(self):
        super().__init__(_native.sequential_sampler())


class GRPOGroupNSampler(_NativeSampler):
    """Whole prompt groups of n_samples_per_prompt only (groups by
    custom_meta["group_id"] or by put call, never by index contiguity)."""

    def __init__(self, n_samples_per_prompt: int):
        self.n_samples_per_prompt = _positive("n_samples_per_prompt", n_samples_per_prompt)
        super().__init__(_native.grpo_group_n_sampler(self.n_samples_per_prompt))


class RankAwareSampler(_NativeSampler):
    """Callers with the same (dp_rank, batch_index) get the same samples;
    different dp_ranks get disjoint samples."""

    def __init__(self):
        super().__init__(_native.rank_aware_sampler())


class SeqlenBalancedSampler(_NativeSampler):
    """Per DP rank batch_size; the first call for a batch_index reserves the
    whole global batch (whole groups), balances custom_meta["total_lengths"]
    over dp_size ranks and answers every rank from that reservation."""

    def __init__(self, n_samples_per_prompt: int = 1, dp_size: int = 1, algorithm: str = "auto",
                 default_length: Optional[int] = None):
        self.n_samples_per_prompt = _positive("n_samples_per_prompt", n_samples_per_prompt)
        self.dp_size = _positive("dp_size", dp_size)
        self.algorithm = algorithm
        self.default_length = default_length
        super().__init__(_native.seqlen_balanced_sampler(self.n_samples_per_prompt, self.dp_size, algorithm,
                                                         -1 if default_length is None else int(default_length)))


class TokenBudgetSampler(_NativeSampler):
    """Fills each rank's batch up to max_tokens (sum of total_lengths), whole
    groups, balanced over dp_size ranks."""

    def __init__(self, max_tokens: int, n_samples_per_prompt: int = 1, dp_size: int = 1,
                 default_length: Optional[int] = None):
        self.max_tokens = _positive("max_tokens", max_tokens)
        self.n_samples_per_prompt = _positive("n_samples_per_prompt", n_samples_per_prompt)
        self.dp_size = _positive("dp_size", dp_size)
        self.default_length = default_length
        super().__init__(_native.token_budget_sampler(self.max_tokens, self.n_samples_per_prompt, self.dp_size,
                                                      -1 if default_length is None else int(default_length)))


_BY_NAME = {
    "SequentialSampler": SequentialSampler,
    "GRPOGroupNSampler": GRPOGroupNSampler,
    "RankAwareSampler": RankAwareSampler,
    "SeqlenBalancedSampler": SeqlenBalancedSampler,
    "TokenBudgetSampler": TokenBudgetSampler,
}


def native_sampler(sampler, args: Optional[dict] = None):
    """The C++ handle of a sampler given as an instance, a class or a name
    (TransferQueue's class names, or seqflow's config names such as
    "seqlen_balanced" with `args`). None means sequential."""
    if sampler is None:
        return None
    if isinstance(sampler, type) and issubclass(sampler, BaseSampler):
        sampler = sampler(**(args or {}))
    if isinstance(sampler, BaseSampler):
        return sampler._native_handle()
    if isinstance(sampler, str):
        if sampler in _BY_NAME:
            return _BY_NAME[sampler](**(args or {}))._native_handle()
        return _native.sampler_by_name(sampler, dict(args or {}))
    raise ValueError(f"sampler must be a BaseSampler instance or subclass, or a sampler name; got {sampler!r}")
