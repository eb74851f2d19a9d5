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

PackPlan, PackStats, MicroBatchPlan and PackedSequence are the C++ objects
(include/seqflow/pack.h, packed_sequence.h) with read-only properties.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from seqflow import _seqflow
from seqflow._arrays import as_int64_array
from seqflow._checks import check_bool

__all__ = [
    "MAX_PACK_LENGTH", "MAX_PADDING_SEQUENCES", "MAX_PLAN_LISTS", "MicroBatchPlan", "PackPlan", "PackStats",
    "PackedSequence", "Ragged", "inverse_permutation", "materialize", "micro_batches", "padding_sequences", "plan",
    "xtuner_baseline",
]

_native = _seqflow.pack
PackPlan = _native.PackPlan
PackStats = _native.PackStats
MicroBatchPlan = _native.MicroBatchPlan
PackedSequence = _native.PackedSequence
padding_sequences = _native.padding_sequences

# The longest pack (2^31 - 1, as packs carry int32 cu_seqlens): the largest
# pack_max_length and padding.
MAX_PACK_LENGTH: int = _native.MAX_PACK_LENGTH
# The most padding sequences in one pack: ceil(pack_max_length / pad_chunk) at most.
MAX_PADDING_SEQUENCES: int = _native.MAX_PADDING_SEQUENCES
# The most lists a plan may hold: (rank, step) pairs, packs, micro-batches.
MAX_PLAN_LISTS: int = _native.MAX_PLAN_LISTS


def plan(lengths, *, dp_size: int, optimizer_steps: int, pack_max_length: int, groups=None, workload="tokens",
         pad_to: str = "cap", pad_chunk: int = 1024, seed: int = 0) -> PackPlan:
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

    A plan holds at most MAX_PLAN_LISTS (rank, step) pairs and packs. Steps
    keep group counts within one of each other; within a step ranks get even
    workloads, and steps too unless a (rank, step) would hold about one group:
    steps are then formed from groups of similar workload (plan.notes says so).
    """
    values = as_int64_array(lengths, "lengths")
    group_ids = None
    if groups is not None:
        group_ids = as_int64_array(groups, "groups", allow_negative=True)
        if group_ids.size != values.size:  # also when empty: the engine reads no groups as none given
            raise ValueError(f"groups has {group_ids.size} entries but lengths has {values.size}; "
                             "give one group id per sample")
    return _native._plan(values, dp_size, optimizer_steps, pack_max_length, group_ids, workload, str(pad_to),
                         pad_chunk, seed)


def xtuner_baseline(lengths, *, dp_size: int, optimizer_steps: int, pack_max_length: int,
                    pad_chunk: int = 1024) -> PackPlan:
    """FOR COMPARISON ONLY: the pipeline xtuner's balanced-packing change
    describes (Karmarkar-Karp equal split over ranks, then over steps, then
    into ceil(tokens / cap) packs per (rank, step), every pack padded to the
    cap, pack counts padded across ranks). It fails where that pipeline asserts
    (counts that do not divide) and does not enforce the cap: see
    stats.packs_over_cap."""
    return _native._xtuner_baseline(as_int64_array(lengths, "lengths"), dp_size, optimizer_steps, pack_max_length,
                                    pad_chunk)


def inverse_permutation(order) -> np.ndarray:
    """inverse[order[i]] = i. For outputs laid out in `order` (a permutation of
    0..n-1), outputs[inverse] restores the original order."""
    return _native._inverse_permutation(as_int64_array(order, "order"))


def micro_batches(lengths, max_token_len: int, *, dp_size: int = 1, same_count_across_ranks: bool = True,
                  count_multiple: int = 1, workload="tokens", order: str = "interleave") -> MicroBatchPlan:
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
    if isinstance(lengths, (list, tuple)) and lengths and hasattr(lengths[0], "__len__") \
            and not isinstance(lengths[0], (int, np.integer)):  # one sequence per rank
        values = [as_int64_array(rank, f"lengths[{i}]") for i, rank in enumerate(lengths)]
    else:
        values = as_int64_array(lengths, "lengths")
    return _native._micro_batches(values, max_token_len, dp_size, same, count_multiple, workload, str(order))


class Ragged(NamedTuple):
    """Token ids of many samples in one flat array: sample i is
    values[offsets[i]:offsets[i + 1]]."""

    values: object
    offsets: object


def materialize(plan: PackPlan, token_ids, *, rank: int | None = None, step: int | None = None, labels=None,
                pad_id: int = 0, ignore_index: int = -100, backend: str = "numpy"):
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
    if backend not in ("numpy", "torch"):
        raise ValueError(f"backend must be 'numpy' or 'torch', got {backend!r}")
    convert = None
    if backend == "torch":
        try:
            import torch
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ImportError("backend='torch' needs torch installed") from error
        convert = torch.from_numpy
    ids = _seqflow.token_samples(token_ids, "token_ids", Ragged)
    label_ids = None if labels is None else _seqflow.token_samples(labels, "labels", Ragged)
    return _native._materialize(plan, ids, label_ids, rank, step, pad_id, ignore_index, convert)
