"""Samplers: which ready samples one caller (one DP rank) gets.

The built-in samplers are the C++ ones (they run inside the controller, under
its lock, without Python; python/bindings/builtin_samplers.cc). A Python
subclass of BaseSampler works too, as in TransferQueue: implement
``sample(ready_indexes, batch_size, **kwargs) -> (sampled, consumed)``. The
keyword arguments are ``dp_rank``, ``batch_index``, ``task_name``,
``partition_id``, ``partition`` and ``sample_info`` (the same object, valid
during the call only: ``partition.get_custom_meta(indexes)`` as
TransferQueue's DataPartitionStatus, ``sample_info.custom_meta(gi)``,
``sample_info.length(gi)``, ``sample_info.group_key(gi, n)``). Optional hooks:
``reserved(partition_id, task_name, sampling_config)`` returns an answer kept
for that caller (or None; by default the answer cached in ``_states`` the way
TransferQueue's samplers cache it), ``clear(partition_id, task_name)`` forgets
state, ``state()`` / ``restore(state)`` take part in checkpoints (JSON-like
values).

Called directly (``sampler.sample(ready, batch_size, **kwargs)`` or
``sampler(...)``), the built-in samplers answer as TransferQueue 0.1.11's do:
``consumed`` is ``sampled``; GRPOGroupNSampler and SeqlenBalancedSampler sort
the ready indexes and, for samples without ``custom_meta["group_id"]``, take
runs of n consecutive global indexes as groups; GRPOGroupNSampler called with
a ``dp_rank`` answers a repeated (dp_rank, batch_index) with the same groups; SeqlenBalancedSampler reads
``total_lengths`` through ``partition.get_custom_meta`` (or ``custom_meta=``,
a dict of global index to dict) and, given neither, splits equally in order.
One difference is deliberate: SeqlenBalancedSampler leaves the shares it
reserved for ranks not served yet out of later batches, so no sample reaches
two ranks (TransferQueue's hands them out again).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Optional

from seqflow import _seqflow

_native = _seqflow.client
_cached = _seqflow.sampler_caches.cached

__all__ = [
    "BaseSampler",
    "GRPOGroupNSampler",
    "RankAwareSampler",
    "SeqlenBalancedSampler",
    "SequentialSampler",
    "TokenBudgetSampler",
    "native_sampler",
]


class BaseSampler(ABC):
    """Base of all samplers: subclass it and implement sample(). Abstract, as
    TransferQueue's: BaseSampler() raises TypeError."""

    def __init__(self):
        # TransferQueue's cache layout: _states[partition_id][task_name][dp_rank][batch_index].
        self._states: dict[Any, Any] = {}

    @abstractmethod
    def sample(self, ready_indexes, batch_size: int, *args, **kwargs) -> tuple[list[int], list[int]]:
        """(sampled, consumed): the samples handed to this caller and those to
        mark consumed for the task."""
        raise NotImplementedError("Subclasses must implement sample")

    def __call__(self, *args, **kwargs) -> tuple[list[int], list[int]]:
        return self.sample(*args, **kwargs)

    def has_cached_result(self, partition_id: str, task_name: str,
                          sampling_config: Optional[dict] = None) -> bool:
        """TransferQueue's check: `_states` holds an answer for this caller's
        (dp_rank, batch_index)."""
        return _cached(self._states, partition_id, task_name, sampling_config or {}) is not None

    def reserved(self, partition_id: str, task_name: str, sampling_config: dict) -> Optional[list[int]]:
        """An answer already kept for this caller, served even when too little
        is ready (and not consumed again). By default the answer cached in
        `_states`, so samplers written for TransferQueue work unchanged."""
        return _cached(self._states, partition_id, task_name, sampling_config)

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

    def save_checkpoint(self) -> dict:
        """TransferQueue's checkpoint hook: the cached answers."""
        return {"_states": self._states}

    def load_checkpoint(self, state: dict) -> None:
        self._states = state["_states"]

    def _native_handle(self):
        """The C++ sampler the controller calls."""
        return _native.python_sampler(self)


# The built-ins (C++ classes; a Python subclass overriding sample() runs as a Python sampler).
BaseSampler.register(_native.BuiltinSampler)
SequentialSampler = _native.SequentialSampler
GRPOGroupNSampler = _native.GRPOGroupNSampler
RankAwareSampler = _native.RankAwareSampler
SeqlenBalancedSampler = _native.SeqlenBalancedSampler
TokenBudgetSampler = _native.TokenBudgetSampler
_BY_NAME = {cls.__name__: cls for cls in (SequentialSampler, GRPOGroupNSampler, RankAwareSampler,
                                          SeqlenBalancedSampler, TokenBudgetSampler)}


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
