"""Samplers: which ready samples one caller (one DP rank) gets.

The built-in samplers hold the C++ ones (they run inside the controller,
under its lock, without Python; python/bindings/builtin_samplers.cc). A Python
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
from typing import Any, Optional, cast

import numpy as np

from seqflow import _seqflow
from seqflow._arguments import workload_argument
from seqflow._arrays import as_int64_array
from seqflow._checks import check_count, check_instance, check_int64
from seqflow._seqflow.client import Sampler as NativeSampler
from seqflow._sampler_caches import cached, reservation_cache, reservation_states

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


class BaseSampler(ABC):
    """Base of all samplers: subclass it and implement sample(). Abstract, as
    TransferQueue's: BaseSampler() raises TypeError."""

    def __init__(self) -> None:
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
        return cached(self._states, partition_id, task_name, sampling_config or {}) is not None

    def reserved(self, partition_id: str, task_name: str, sampling_config: dict) -> Optional[list[int]]:
        """An answer already kept for this caller, served even when too little
        is ready (and not consumed again). By default the answer cached in
        `_states`, so samplers written for TransferQueue work unchanged."""
        return cached(self._states, partition_id, task_name, sampling_config)

    def clear(self, partition_id: str, task_name: Optional[str] = None) -> None:
        """Forgets the state of a partition (or of one task in it)."""
        if task_name is None:
            self._states.pop(partition_id, None)
        else:
            self._states.get(partition_id, {}).pop(task_name, None)

    def clear_cache(self, partition_id: str) -> None:
        """TransferQueue's name for clear(partition_id)."""
        self.clear(partition_id)

    def state(self) -> Any:
        return {}

    def restore(self, state: Any) -> None:
        pass

    def save_checkpoint(self) -> dict:
        """TransferQueue's checkpoint hook: the cached answers."""
        return {"_states": self._states}

    def load_checkpoint(self, state: dict) -> None:
        self._states = state["_states"]

    def _native_handle(self) -> NativeSampler:
        """The C++ sampler the controller calls."""
        return _native.python_sampler(self)


def _positive(value: Any, name: str) -> int:
    """A count of at least 1, in TransferQueue's words."""
    number = check_int64(value, name)
    if number < 1:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return number


def _optional_length(value: Any) -> int:
    """default_length for the engine: -1 when None (a sample without total_lengths is an error)."""
    return -1 if value is None else check_count(value, "default_length")


class BuiltinSampler(BaseSampler):
    """A built-in sampler: a handle to the C++ implementation, which the
    controller runs under its lock, without Python. Called directly
    (sampler.sample(ready, batch_size, **kwargs)) it answers as TransferQueue
    0.1.11's does, with its signature. Its `_states` is a read-only view of
    the C++ reservations in TransferQueue's layout."""

    # TransferQueue's direct calls: sort the ready indexes first (its group
    # samplers do), and cache (sampled, consumed) pairs or only sampled.
    _sorts_ready = False
    _caches_pairs = False

    # The settings the C++ sampler is made with: read-only once it is, since
    # assigning one would leave the sampler as it was without a word.
    _SETTINGS: tuple[str, ...] = ()

    def __init__(self, native: NativeSampler) -> None:
        # Not BaseSampler.__init__: `_states` is the C++ reservations' view.
        self._native = native

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._SETTINGS and "_native" in self.__dict__:
            raise AttributeError(f"{type(self).__name__}.{name} is fixed when the sampler is made; make a new "
                                 f"{type(self).__name__} instead")
        super().__setattr__(name, value)

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def _states(self) -> dict:  # type: ignore[override]
        return reservation_states(self.state(), self._caches_pairs)

    def _run(self, ready_indexes: Any, batch_size: Any, partition_id: Any, task_name: Any, dp_rank: Any,
             batch_index: Any, partition: Any, custom_meta: Optional[dict]) -> tuple[list[int], list[int]]:
        """One direct call of the C++ sampler (not while a client uses it).
        dp_rank None: the caller named no rank (GRPOGroupNSampler then keeps
        no answer for it)."""
        ready = cast(np.ndarray, as_int64_array(ready_indexes, "ready_indexes"))
        if self._sorts_ready:
            ready = np.sort(ready)
        batch_size = check_int64(batch_size, "batch_size")
        partition_id = check_instance(partition_id, "partition_id", str, "a str")
        task_name = check_instance(task_name, "task_name", str, "a str")
        rank = None if dp_rank is None else check_int64(dp_rank, "dp_rank")
        index = 0 if batch_index is None else check_int64(batch_index, "batch_index")
        meta = None
        if custom_meta is not None or partition is not None:
            # The partition's custom_meta wins over the caller's dict, as TransferQueue reads it.
            meta = dict(custom_meta or {})
            if partition is not None:
                meta.update(partition.get_custom_meta(ready.tolist()))
        sampled = _native.sample_directly(self._native, ready, batch_size, partition_id, task_name, rank, index, meta)
        return sampled, list(sampled)

    def _native_handle(self) -> NativeSampler:
        """The C++ sampler the controller calls: the built-in itself, or (a
        Python subclass that overrides sample()) one that calls this object."""
        return self._native if type(self).sample in _BUILTIN_SAMPLE_FUNCTIONS else _native.python_sampler(self)

    def clear(self, partition_id: str, task_name: Optional[str] = None) -> None:
        """Forgets the state of a partition (or of one task in it)."""
        self._native.clear(partition_id, task_name)

    def state(self) -> Any:
        """The state kept in checkpoints (reservations of DP ranks), as JSON-like values."""
        return self._native.state()

    def restore(self, state: Any) -> None:
        self._native.restore(state)

    def save_checkpoint(self) -> dict:
        """TransferQueue's checkpoint hook: {'state': state()}."""
        return {"state": self.state()}

    def load_checkpoint(self, state: dict) -> None:
        self.restore(state["state"])

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class SequentialSampler(BuiltinSampler):
    """The first batch_size ready samples, oldest first. Through a client it
    waits for a whole batch; called directly it slices as TransferQueue's
    does (fewer when fewer are ready)."""

    def __init__(self) -> None:
        super().__init__(_native.sequential_sampler())

    def sample(self, ready_indexes, batch_size: int, *args, **kwargs) -> tuple[list[int], list[int]]:
        """(sampled, consumed): consumed is sampled, as TransferQueue 0.1.11's
        samplers answer; a negative batch_size counts from the end, as its slice."""
        sampled = [int(i) for i in list(ready_indexes)[:batch_size]]
        return sampled, list(sampled)


class GRPOGroupNSampler(BuiltinSampler):
    """Whole prompt groups of n_samples_per_prompt only. Through a client,
    groups are custom_meta["group_id"] or runs of n within one put, never
    index contiguity; called directly, runs of n consecutive global indexes
    (TransferQueue's rule) unless custom_meta gives group_id."""

    _sorts_ready = True
    _caches_pairs = True
    _SETTINGS = ("n_samples_per_prompt",)

    def __init__(self, n_samples_per_prompt: int = 1) -> None:
        self.n_samples_per_prompt = _positive(n_samples_per_prompt, "n_samples_per_prompt")
        super().__init__(_native.grpo_group_n_sampler(self.n_samples_per_prompt))

    def sample(self, ready_indexes, batch_size: int, task_name: str = "", partition_id: str = "", *args,
               dp_rank: Optional[int] = None, batch_index: Optional[int] = None, partition=None,
               custom_meta: Optional[dict] = None, **kwargs) -> tuple[list[int], list[int]]:
        """(sampled, consumed): consumed is sampled, as TransferQueue 0.1.11's samplers answer."""
        return self._run(ready_indexes, batch_size, partition_id, task_name, dp_rank, batch_index, partition,
                         custom_meta)


class RankAwareSampler(BuiltinSampler):
    """Callers with the same (dp_rank, batch_index) get the same samples;
    different dp_ranks get disjoint samples."""

    def __init__(self) -> None:
        super().__init__(_native.rank_aware_sampler())

    def sample(self, ready_indexes, batch_size: int, dp_rank: Optional[int] = 0, batch_index: Optional[int] = 0,
               task_name: str = "", partition_id: str = "", *args, partition=None,
               custom_meta: Optional[dict] = None, **kwargs) -> tuple[list[int], list[int]]:
        """(sampled, consumed): consumed is sampled, as TransferQueue 0.1.11's samplers answer."""
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

    _SETTINGS = ("n_samples_per_prompt", "dp_size", "algorithm", "default_length", "workload")

    def __init__(self, n_samples_per_prompt: int = 1, dp_size: int = 1, algorithm: str = "auto",
                 default_length: Optional[int] = None, workload: Any = "tokens") -> None:
        self.n_samples_per_prompt = _positive(n_samples_per_prompt, "n_samples_per_prompt")
        self.dp_size = _positive(dp_size, "dp_size")
        length = _optional_length(default_length)
        check_instance(algorithm, "algorithm", str, "a str")
        self.algorithm = algorithm
        self.default_length, self.workload = default_length, workload
        # Not GRPOGroupNSampler.__init__, which would make a C++ sampler of its own.
        BuiltinSampler.__init__(self, _native.seqlen_balanced_sampler(self.n_samples_per_prompt, self.dp_size,
                                                                       self.algorithm, length,
                                                                       workload_argument(workload)))

    @property
    def _balanced_cache(self) -> dict:
        """TransferQueue's view of the reservations: {(partition_id,
        task_name, batch_index): [samples of rank 0, rank 1, ...]}."""
        return reservation_cache(self.state())

    def sample(self, ready_indexes, batch_size: int, task_name: str = "", partition_id: str = "", *args,
               dp_rank: Optional[int] = None, batch_index: Optional[int] = None, partition=None,
               custom_meta: Optional[dict] = None, **kwargs) -> tuple[list[int], list[int]]:
        """(sampled, consumed): consumed is sampled, as TransferQueue 0.1.11's samplers answer."""
        if isinstance(dp_rank, (int, np.integer)) and not isinstance(dp_rank, bool) and dp_rank >= self.dp_size:
            return [], []  # TransferQueue's answer for a rank past dp_size
        return self._run(ready_indexes, batch_size, partition_id, task_name, dp_rank, batch_index, partition,
                         custom_meta)


class TokenBudgetSampler(BuiltinSampler):
    """Fills each rank's batch up to max_tokens (sum of total_lengths), whole
    groups, balanced over dp_size ranks by `workload` (as
    seqflow.balance.partition takes it; default tokens)."""

    _sorts_ready = True
    _caches_pairs = True
    _SETTINGS = ("max_tokens", "n_samples_per_prompt", "dp_size", "default_length", "workload")

    def __init__(self, max_tokens: int, n_samples_per_prompt: int = 1, dp_size: int = 1,
                 default_length: Optional[int] = None, workload: Any = "tokens") -> None:
        self.max_tokens = _positive(max_tokens, "max_tokens")
        self.n_samples_per_prompt = _positive(n_samples_per_prompt, "n_samples_per_prompt")
        self.dp_size = _positive(dp_size, "dp_size")
        self.default_length, self.workload = default_length, workload
        super().__init__(_native.token_budget_sampler(self.max_tokens, self.n_samples_per_prompt, self.dp_size,
                                                      _optional_length(default_length),
                                                      workload_argument(workload)))

    def sample(self, ready_indexes, batch_size: int, *args, partition_id: str = "", task_name: str = "",
               dp_rank: Optional[int] = 0, batch_index: Optional[int] = 0, partition=None,
               custom_meta: Optional[dict] = None, **kwargs) -> tuple[list[int], list[int]]:
        """(sampled, consumed): consumed is sampled, as TransferQueue 0.1.11's samplers answer."""
        return self._run(ready_indexes, batch_size, partition_id, task_name, dp_rank, batch_index, partition,
                         custom_meta)


# The built-ins' own sample(): a subclass that keeps one runs as the C++ sampler itself.
_BUILTIN_SAMPLE_FUNCTIONS = frozenset(cls.sample for cls in (SequentialSampler, GRPOGroupNSampler, RankAwareSampler,
                                                             SeqlenBalancedSampler, TokenBudgetSampler))
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
