"""Pack plans and micro-batch plans.

`plan` spreads one global batch over data-parallel ranks and optimizer steps
and packs each (rank, step) into sequences of at most `pack_max_length`
tokens: every sample exactly once, exactly `optimizer_steps` steps on every
rank, no pack over the cap, the same pack count on every rank within a step,
groups kept on one rank and in one step. `materialize` turns a plan and the
samples' token ids into flat packed sequences. `micro_batches` splits each
rank's samples into the fewest micro-batches under a token cap, the same
count on every rank (verl's dynamic batch size with the cap enforced).
`xtuner_baseline` is for comparison only (benchmarks, `seqflow pack --compare`).

The functions here convert their arguments once (numpy) and call one typed
C++ function each (python/bindings/pack_bindings.cc; include/seqflow/pack.h,
packed_sequence.h), where the planning runs: PackPlan, PackStats,
MicroBatchPlan and PackedSequence are the C++ objects with read-only
properties. MAX_PACK_LENGTH (2^31 - 1, as packs carry int32 cu_seqlens) is the
largest pack_max_length and padding; MAX_PADDING_SEQUENCES the most padding
sequences in one pack; MAX_PLAN_LISTS the most (rank, step) pairs, packs or
micro-batches a plan may hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, Optional, Union

import numpy as np

from seqflow._arguments import UINT64_MAX, WorkloadLike, int64_argument, optional_int64_argument, workload_argument
from seqflow._arrays import IntArrayLike, as_int64_array
from seqflow._checks import check_bool, short_repr
from seqflow._seqflow import pack as _native
from seqflow._seqflow.pack import (
    MAX_PACK_LENGTH,
    MAX_PADDING_SEQUENCES,
    MAX_PLAN_LISTS,
    MicroBatchPlan,
    PackedSequence,
    PackPlan,
    PackStats,
)
from seqflow._token_ids import Ragged, token_samples

__all__ = [
    "MAX_PACK_LENGTH", "MAX_PADDING_SEQUENCES", "MAX_PLAN_LISTS", "MicroBatchPlan", "PackPlan", "PackStats",
    "PackedSequence", "Ragged", "inverse_permutation", "materialize", "micro_batches", "padding_sequences", "plan",
    "xtuner_baseline",
]

# progress(phase, done, total)
ProgressCallback = Callable[[str, int, int], object]


def plan(lengths: IntArrayLike, *, dp_size: int, optimizer_steps: int, pack_max_length: int,
         groups: Optional[IntArrayLike] = None, workload: WorkloadLike = "tokens", pad_to: str = "cap",
         pad_chunk: int = 1024, seed: int = 0, progress: Optional[ProgressCallback] = None) -> PackPlan:
    """Plan the packs of one global batch.

    lengths: tokens per sample; a sample longer than pack_max_length is an error.
    groups: optional group id per sample (e.g. the responses of one prompt);
        a group stays on one rank and in one step.
    workload: what balancing evens out: "tokens", "verl", "quadratic(a,b)", a
        Workload (calibrated ones too) or an OnlineWorkload (its current
        model). The cap is always on tokens.
    pad_to: "cap" (every pack to pack_max_length), "step_max" (every pack to
        the longest pack of its slot across ranks) or "none".
    pack_max_length: at most MAX_PACK_LENGTH (2^31 - 1): packs are
        materialized with int32 cu_seqlens.
    pad_chunk: the longest padding sequence; a pack's padding makes at most
        MAX_PADDING_SEQUENCES (2^20) of them, so pad_chunk must be at least
        pack_max_length / 2^20.
    seed: only decides which rank gets which part where ranks tie; the planner
        uses no randomness.
    progress: optional progress(phase, done, total), called as the planner
        works: phase "steps_first", "steps_by_size" (only when tried) or
        "packing"; done of total samples; at most 1,002 calls per phase. An
        exception it raises ends plan() with that exception. The plan is the
        same with or without it.

    A plan holds at most MAX_PLAN_LISTS (rank, step) pairs and packs. Steps
    keep group counts within one of each other; within a step ranks get even
    workloads, and steps too unless a (rank, step) would hold about one group:
    steps are then formed from groups of similar workload (plan.notes says so).
    """
    # Negative lengths: the engine names them (lengths[i] = v is negative).
    values = as_int64_array(lengths, "lengths", allow_negative=True)
    group_ids = None
    if groups is not None:
        group_ids = as_int64_array(groups, "groups", allow_negative=True)
        # Also when empty: the engine reads no groups as none given.
        if group_ids.size != values.size:
            raise ValueError(f"groups has {group_ids.size} entries but lengths has {values.size}; "
                             "give one group id per sample")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be None or a callable progress(phase, done, total), "
                        f"got {type(progress).__name__}")
    return _native.plan(values, int64_argument(dp_size, "dp_size"), int64_argument(optimizer_steps, "optimizer_steps"),
                        int64_argument(pack_max_length, "pack_max_length"), group_ids, workload_argument(workload),
                        str(pad_to), int64_argument(pad_chunk, "pad_chunk"),
                        int64_argument(seed, "seed", 0, UINT64_MAX), progress)


def xtuner_baseline(lengths: IntArrayLike, *, dp_size: int, optimizer_steps: int, pack_max_length: int,
                    pad_chunk: int = 1024) -> PackPlan:
    """FOR COMPARISON ONLY: the pipeline xtuner's balanced-packing change
    describes (Karmarkar-Karp equal split over ranks, then over steps, then
    into ceil(tokens / cap) packs per (rank, step), every pack padded to the
    cap, pack counts padded across ranks). It fails where that pipeline asserts
    (counts that do not divide) and does not enforce the cap: see
    stats.packs_over_cap."""
    return _native.xtuner_baseline(as_int64_array(lengths, "lengths"), int64_argument(dp_size, "dp_size"),
                                   int64_argument(optimizer_steps, "optimizer_steps"),
                                   int64_argument(pack_max_length, "pack_max_length"),
                                   int64_argument(pad_chunk, "pad_chunk"))


def micro_batches(lengths: Union[IntArrayLike, Sequence[IntArrayLike]], max_token_len: int, *, dp_size: int = 1,
                  same_count_across_ranks: bool = True, count_multiple: int = 1, workload: WorkloadLike = "tokens",
                  order: str = "interleave") -> MicroBatchPlan:
    """Split samples into micro-batches of at most `max_token_len` tokens.

    lengths: either one 1-D sequence of all samples, which are first spread
        over dp_size ranks (balanced; indexes in the plan are global), or a list
        of one sequence per rank, already placed (indexes are local to the rank;
        dp_size may stay 1 and is then taken from the list).
    The count is the fewest for which the cap holds, the same on every rank
    when same_count_across_ranks, and a multiple of count_multiple (pipeline
    schedules). Micro-batches are balanced by `workload` (as plan takes it). A plan of more than
    MAX_PLAN_LISTS micro-batches over all ranks is refused.
    order: "interleave" (largest, smallest, second largest, ...: shrinks
        pipeline bubbles), "descending" or "none".
    """
    same = check_bool(same_count_across_ranks, "same_count_across_ranks")
    cap = int64_argument(max_token_len, "max_token_len")
    ranks = int64_argument(dp_size, "dp_size")
    multiple = int64_argument(count_multiple, "count_multiple")
    model = workload_argument(workload)
    # Negative lengths: the engine names them (lengths[i] = v is negative).
    if _per_rank(lengths):
        placed = [as_int64_array(rank, f"lengths[{index}]", allow_negative=True) for index, rank in enumerate(lengths)]
        return _native.micro_batches_per_rank(placed, cap, len(placed) if ranks == 1 else ranks, same, multiple,
                                              model, str(order))
    return _native.micro_batches(as_int64_array(lengths, "lengths", allow_negative=True), cap, ranks, same, multiple,
                                 model, str(order))


def _per_rank(lengths: Any) -> bool:
    """A non-empty list or tuple of sized items (not integers): one sequence per rank."""
    if not isinstance(lengths, (list, tuple)) or not lengths:
        return False
    first = lengths[0]
    return hasattr(first, "__len__") and not (isinstance(first, (int, np.integer)) and not isinstance(first, bool))


def materialize(plan: PackPlan, token_ids: Any, *, rank: Optional[int] = None, step: Optional[int] = None,
                labels: Any = None, pad_id: int = 0, ignore_index: int = -100, backend: str = "numpy") -> Any:
    """Build the packed sequences of a plan (in C++: seqflow::pack::materialize).

    token_ids: the token ids of every sample, indexed as in the plan: a list of
        1-D arrays or tensors, a torch nested tensor, or a Ragged(values, offsets).
        Ids must have an integer dtype: float arrays are refused, even with
        whole values (cast them yourself if you know they are exact).
    labels: the same for labels; by default the token ids themselves. Padding
        positions get ignore_index; padding tokens are pad_id (int64 integers).
    rank, step: which packs, 0..dp_size-1 and 0..optimizer_steps-1 (no
        negative indexing). Returns a list over packs for one (rank, step);
        a list over steps of those for one rank; a list over ranks of those
        when rank is None.
    backend: "numpy", or "torch" for tensors (needs torch installed).
    """
    if not isinstance(plan, PackPlan):
        raise ValueError(f"plan must be a PackPlan (from seqflow.pack.plan), got {type(plan).__name__}")
    if not isinstance(backend, str) or backend not in ("numpy", "torch"):
        raise ValueError(f"backend must be 'numpy' or 'torch', got {short_repr(backend)}")
    convert = None
    if backend == "torch":
        try:
            import torch
        except ImportError as error:
            raise ImportError("backend='torch' needs torch installed") from error
        convert = torch.from_numpy
    ids, id_offsets = token_samples(token_ids, "token_ids")
    label_arrays, label_offsets = (None, None) if labels is None else token_samples(labels, "labels")
    return _native.materialize(plan, ids, id_offsets, label_arrays, label_offsets,
                               optional_int64_argument(rank, "rank"), optional_int64_argument(step, "step"),
                               int64_argument(pad_id, "pad_id"),
                               int64_argument(ignore_index, "ignore_index"), convert)


def inverse_permutation(order: IntArrayLike) -> np.ndarray:
    """inverse[order[i]] = i. For outputs laid out in `order` (a permutation of
    0..n-1), outputs[inverse] restores the original order."""
    return _native.inverse_permutation(as_int64_array(order, "order"))


def padding_sequences(padding: int, pad_chunk: int) -> list[int]:
    """The lengths of the padding sequences that make up `padding` tokens (at most MAX_PACK_LENGTH, in at most
    MAX_PADDING_SEQUENCES sequences): full chunks of pad_chunk, then the remainder."""
    return _native.padding_sequences(int64_argument(padding, "padding"), int64_argument(pad_chunk, "pad_chunk"))
