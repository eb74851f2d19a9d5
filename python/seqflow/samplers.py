"""Samplers: which ready samples one caller (one DP rank) gets.

The built-in samplers are the C++ ones (they run inside the controller, under
its lock, without Python). A Python subclass of BaseSampler works too, as in
TransferQueue: implement ``sample(ready_indexes, batch_size, **kwargs) ->
(sampled, consumed)``. The keyword arguments are ``dp_rank``, ``batch_index``,
``task_name``, ``partition_id``, ``partition`` and ``sample_info`` (the same
object, valid during the call only: ``partition.get_custom_meta(indexes)`` as
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
from seqflow._arrays import as_int64_array
from seqflow._checks import INT64_MIN, check_count, check_instance, check_int64

_native = _seqflow.client
_caches = _seqflow.sampler_caches

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
    if check_count(value, name, minimum=INT64_MIN) < 1:  # TransferQueue's words for the range
        raise ValueError(f"{name} must be positive, got {value!r}")
    return int(value)


def _optional_length(value) -> int:
    """default_length for the engine: -1 when None (a sample without total_lengths is an error)."""
    return -1 if value is None else check_count(value, "default_length")


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
        return _caches.cached(self._states, partition_id, task_name, sampling_config or {}) is not None

    def reserved(self, partition_id: str, task_name: str, sampling_config: dict) -> Optional[list[int]]:
        """An answer already kept for this caller, served even when too little
        is ready (and not consumed again). By default the answer cached in
        `_states`, so samplers written for TransferQueue work unchanged."""
        return _caches.cached(self._states, partition_id, task_name, sampling_config)

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


def _builtin(sample):
    """Marks a built-in sample(): a subclass that overrides it runs as a
    Python sampler."""
    sample._seqflow_builtin = True
    return sample


class _NativeSampler(BaseSampler):
    """A built-in sampler: a handle to the C++ implementation. Its `_states`
    is a read-only view of the C++ reservations in TransferQueue's layout."""

    # Sort the ready indexes of a direct call, as TransferQueue's group samplers do.
    _sorts_ready = False
    # TransferQueue's cache entry: (sampled, consumed), or only sampled (SequentialSampler, RankAwareSampler).
    _caches_pairs = True

    def __init__(self, native):
        # No BaseSampler.__init__: `_states` is the C++ state, not a dict of ours.
        self._native = native

    def _native_handle(self):
        if getattr(type(self).sample, "_seqflow_builtin", False):
            return self._native
        return _native.python_sampler(self)  # a Python subclass overrides sample()

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def _states(self) -> dict:
        return _caches.reservation_states(self._native.state(), self._caches_pairs)

    def clear(self, partition_id: str, task_name: Optional[str] = None) -> None:
        self._native.clear(partition_id, task_name)

    def state(self):
        return self._native.state()

    def restore(self, state) -> None:
        self._native.restore(state)

    def save_checkpoint(self) -> dict:
        return {"state": self._native.state()}

    def load_checkpoint(self, state: dict) -> None:
        self._native.restore(state["state"])

    def _run(self, ready_indexes, batch_size: int, partition_id: str, task_name: str, dp_rank, batch_index,
             partition, custom_meta: Optional[dict]) -> tuple[list[int], list[int]]:
        """One direct call of the C++ sampler. Do not make it while a client
        uses this sampler."""
        # dp_rank None: the caller named no rank (GRPOGroupNSampler then keeps no answer for it).
        # Types here; ranges where the engine words them as TransferQueue does ("dp_rank -1 must be ...").
        sampled = _native.run_sampler(self._native, as_int64_array(ready_indexes, "ready_indexes"), self._sorts_ready,
                                      check_int64(batch_size, "batch_size"),
                                      check_instance(partition_id, "partition_id", str, "a str"),
                                      check_instance(task_name, "task_name", str, "a str"),
                                      None if dp_rank is None else check_int64(dp_rank, "dp_rank"),
                                      check_int64(batch_index or 0, "batch_index"), partition, custom_meta)
        return sampled, list(sampled)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class SequentialSampler(_NativeSampler):
    """The first batch_size ready samples, oldest first. Through a client it
    waits for a whole batch; called directly it slices as TransferQueue's
    does (fewer when fewer are ready)."""

    _caches_pairs = False

    def __init__(self):
        super().__init__(_native.sequential_sampler())

    @_builtin
    def sample(self, ready_indexes, batch_size: int, *args, **kwargs) -> tuple[list[int], list[int]]:
        # TransferQueue's slice, negative batch_size included (it counts from the end).
        sampled = [int(i) for i in list(ready_indexes)[:batch_size]]
        return sampled, list(sampled)


class GRPOGroupNSampler(_NativeSampler):
    """Whole prompt groups of n_samples_per_prompt only. Through a client,
    groups are custom_meta["group_id"] or runs of n within one put, never
    index contiguity; called directly, runs of n consecutive global indexes
    (TransferQueue's rule) unless custom_meta gives group_id."""

    _sorts_ready = True

    def __init__(self, n_samples_per_prompt: int = 1):
        self.n_samples_per_prompt = _positive("n_samples_per_prompt", n_samples_per_prompt)
        super().__init__(_native.grpo_group_n_sampler(self.n_samples_per_prompt))

    @_builtin
    def sample(self, ready_indexes, batch_size: int, task_name: str = "", partition_id: str = "", *args,
               dp_rank: Optional[int] = None, batch_index: Optional[int] = None, partition=None,
               custom_meta: Optional[dict] = None, **kwargs) -> tuple[list[int], list[int]]:
        return self._run(ready_indexes, batch_size, partition_id, task_name, dp_rank, batch_index, partition,
                         custom_meta)


class RankAwareSampler(_NativeSampler):
    """Callers with the same (dp_rank, batch_index) get the same samples;
    different dp_ranks get disjoint samples."""

    _caches_pairs = False

    def __init__(self):
        super().__init__(_native.rank_aware_sampler())

    @_builtin
    def sample(self, ready_indexes, batch_size: int, dp_rank: int = 0, batch_index: int = 0, task_name: str = "",
               partition_id: str = "", *args, partition=None, custom_meta: Optional[dict] = None,
               **kwargs) -> tuple[list[int], list[int]]:
        return self._run(ready_indexes, batch_size, partition_id, task_name, dp_rank, batch_index, partition,
                         custom_meta)


class SeqlenBalancedSampler(GRPOGroupNSampler):
    """Per DP rank batch_size; the first call for a batch_index reserves the
    whole global batch (whole groups), balances custom_meta["total_lengths"]
    over dp_size ranks and answers every rank from that reservation.
    algorithm "kk" splits exactly as TransferQueue does; "auto" (default)
    balances better. default_length stands in for a missing total_lengths
    (None: a missing one is an error). workload: what the split evens out, as
    seqflow.balance.partition takes it (default tokens; an OnlineWorkload
    counts as its model at construction)."""

    def __init__(self, n_samples_per_prompt: int = 1, dp_size: int = 1, algorithm: str = "auto",
                 default_length: Optional[int] = None, workload="tokens"):
        self.n_samples_per_prompt = _positive("n_samples_per_prompt", n_samples_per_prompt)
        self.dp_size = _positive("dp_size", dp_size)
        self.algorithm = algorithm
        self.default_length = default_length
        self.workload = workload
        # A GRPOGroupNSampler for isinstance (as TransferQueue's), with its own C++ sampler.
        _NativeSampler.__init__(self, _native.seqlen_balanced_sampler(
            self.n_samples_per_prompt, self.dp_size, algorithm, _optional_length(default_length), workload))

    @_builtin
    def sample(self, ready_indexes, batch_size: int, task_name: str = "", partition_id: str = "", *args,
               dp_rank: Optional[int] = None, batch_index: Optional[int] = None, partition=None,
               custom_meta: Optional[dict] = None, **kwargs) -> tuple[list[int], list[int]]:
        if dp_rank is not None and dp_rank >= self.dp_size:
            return [], []  # TransferQueue's answer for a rank past dp_size
        return self._run(ready_indexes, batch_size, partition_id, task_name, dp_rank, batch_index, partition,
                         custom_meta)

    @property
    def _balanced_cache(self) -> dict:
        """TransferQueue's view of the reservations: {(partition_id,
        task_name, batch_index): [samples of rank 0, rank 1, ...]}."""
        return _caches.reservation_cache(self._native.state())


class TokenBudgetSampler(_NativeSampler):
    """Fills each rank's batch up to max_tokens (sum of total_lengths), whole
    groups, balanced over dp_size ranks by `workload` (as
    seqflow.balance.partition takes it; default tokens)."""

    _sorts_ready = True

    def __init__(self, max_tokens: int, n_samples_per_prompt: int = 1, dp_size: int = 1,
                 default_length: Optional[int] = None, workload="tokens"):
        self.max_tokens = _positive("max_tokens", max_tokens)
        self.n_samples_per_prompt = _positive("n_samples_per_prompt", n_samples_per_prompt)
        self.dp_size = _positive("dp_size", dp_size)
        self.default_length = default_length
        self.workload = workload
        super().__init__(_native.token_budget_sampler(self.max_tokens, self.n_samples_per_prompt, self.dp_size,
                                                      _optional_length(default_length), workload))

    @_builtin
    def sample(self, ready_indexes, batch_size: int, *args, partition_id: str = "", task_name: str = "",
               dp_rank: int = 0, batch_index: int = 0, partition=None, custom_meta: Optional[dict] = None,
               **kwargs) -> tuple[list[int], list[int]]:
        return self._run(ready_indexes, batch_size, partition_id, task_name, dp_rank, batch_index, partition,
                         custom_meta)


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
