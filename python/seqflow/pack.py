"""Pack plans and micro-batch plans.

`plan` spreads one global batch over data-parallel ranks and optimizer steps
and packs each (rank, step) into sequences of at most `pack_max_length`
tokens, with guarantees that hold for every input: every sample exactly once,
exactly `optimizer_steps` steps on every rank, no pack over the cap, the same
pack count on every rank within a step, groups kept on one rank and in one
step. `materialize` turns a plan and the samples' token ids into flat packed
sequences.

`micro_batches` splits each rank's samples into the fewest micro-batches under
a token cap, with the same count on every rank (verl's dynamic batch size with
the cap enforced).

`xtuner_baseline` is the pipeline xtuner's balanced-packing change describes,
kept for comparison only (benchmarks, `seqflow pack --compare`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from seqflow import _seqflow
from seqflow._arrays import as_int64_array
from seqflow._checks import check_bool
from seqflow.balance import _INT64_MAX, _as_int, _as_workload

__all__ = [
    "MAX_PACK_LENGTH",
    "MAX_PADDING_SEQUENCES",
    "MAX_PLAN_LISTS",
    "MicroBatchPlan",
    "PackPlan",
    "PackStats",
    "PackedSequence",
    "Ragged",
    "inverse_permutation",
    "materialize",
    "micro_batches",
    "padding_sequences",
    "plan",
    "xtuner_baseline",
]

# The longest pack (2^31 - 1, as packs carry int32 cu_seqlens): the largest
# pack_max_length and padding.
MAX_PACK_LENGTH: int = _seqflow.pack.MAX_PACK_LENGTH
# The most padding sequences in one pack: ceil(pack_max_length / pad_chunk) at most.
MAX_PADDING_SEQUENCES: int = _seqflow.pack.MAX_PADDING_SEQUENCES
# The most lists a plan may hold: (rank, step) pairs, packs, micro-batches.
MAX_PLAN_LISTS: int = _seqflow.pack.MAX_PLAN_LISTS


def _index(value, name: str, count: int) -> int:
    """`value` as an index into `count` things: 0..count-1, no negative indexing."""
    index = _as_int(value, name)
    if not 0 <= index < count:
        raise ValueError(f"{name} must be in 0..{count - 1}, got {index}")
    return index


@dataclass(frozen=True)
class PackStats:
    """What a plan costs and how even it is.

    tokens, workloads: (dp_size, optimizer_steps) arrays of real tokens and workload.
    token_spread, workload_spread: per step, (max - min) / mean across ranks.
    packs_per_step: packs on every rank in each step.
    min_packs_per_step: per step, max over ranks of ceil(tokens / pack_max_length).
    padding_ratio: padding tokens / all tokens.
    padding_packs: packs without samples; empty_rank_steps: (rank, step) pairs without samples.
    packs_over_cap: always 0 for `plan`; the baseline may break the cap.
    """

    tokens: np.ndarray
    workloads: np.ndarray
    token_spread: np.ndarray
    workload_spread: np.ndarray
    packs_per_step: np.ndarray
    min_packs_per_step: np.ndarray
    real_tokens: int
    padding_tokens: int
    padding_ratio: float
    padding_packs: int
    empty_rank_steps: int
    max_pack_tokens: int
    packs_over_cap: int


@dataclass(frozen=True, repr=False)
class PackPlan:
    """packs[rank][step] is a list of packs; a pack is a list of sample indexes.

    pack_tokens[rank][step][slot] and pack_padding[rank][step][slot] give each
    pack's real and padding tokens; the padding is made of padding sequences of
    at most pad_chunk tokens (see `padding_sequences`). notes say what a user
    should know, e.g. that some steps hold only padding packs.
    """

    packs: list
    pack_tokens: list
    pack_padding: list
    lengths: np.ndarray
    dp_size: int
    optimizer_steps: int
    pack_max_length: int
    pad_to: str
    pad_chunk: int
    stats: PackStats
    notes: list

    def padding_sequences(self, rank: int, step: int, slot: int) -> list:
        """Lengths of the padding sequences that end pack `slot` of (rank, step)."""
        rank, step, slot = self._pack_index(rank, step, slot)
        return padding_sequences(self.pack_padding[rank][step][slot], self.pad_chunk)

    def padded_length(self, rank: int, step: int, slot: int) -> int:
        rank, step, slot = self._pack_index(rank, step, slot)
        return self.pack_tokens[rank][step][slot] + self.pack_padding[rank][step][slot]

    def _pack_index(self, rank, step, slot) -> tuple:
        rank = _index(rank, "rank", self.dp_size)
        step = _index(step, "step", self.optimizer_steps)
        return rank, step, _index(slot, "slot", len(self.packs[rank][step]))

    def to_dict(self) -> dict:
        """A JSON-ready dict: the packs, their padding, the stats and the notes."""
        stats = {
            name: (value.tolist() if isinstance(value, np.ndarray) else value)
            for name, value in self.stats.__dict__.items()
        }
        return {
            "dp_size": self.dp_size,
            "optimizer_steps": self.optimizer_steps,
            "pack_max_length": self.pack_max_length,
            "pad_to": self.pad_to,
            "pad_chunk": self.pad_chunk,
            "packs": self.packs,
            "pack_tokens": self.pack_tokens,
            "pack_padding": self.pack_padding,
            "stats": stats,
            "notes": list(self.notes),
        }

    def __repr__(self) -> str:
        s = self.stats
        packs = s.packs_per_step.tolist()
        shown = packs if len(packs) <= 8 else packs[:8] + ["..."]
        spread = float(s.token_spread.max()) if s.token_spread.size else 0.0
        notes = f", {len(self.notes)} note(s)" if self.notes else ""
        return (
            f"PackPlan(samples={self.lengths.size}, dp_size={self.dp_size}, "
            f"optimizer_steps={self.optimizer_steps}, pack_max_length={self.pack_max_length}, "
            f"pad_to={self.pad_to!r}, packs_per_step={shown}, "
            f"padding={100 * s.padding_ratio:.1f}%, max_token_spread={100 * spread:.2f}%{notes})"
        )


def _to_plan(result: dict, lengths: np.ndarray) -> PackPlan:
    stats = PackStats(**result.pop("stats"))
    return PackPlan(lengths=lengths, stats=stats, **result)


def plan(
    lengths,
    *,
    dp_size: int,
    optimizer_steps: int,
    pack_max_length: int,
    groups=None,
    workload="tokens",
    pad_to: str = "cap",
    pad_chunk: int = 1024,
    seed: int = 0,
) -> PackPlan:
    """Plan the packs of one global batch.

    lengths: tokens per sample; a sample longer than pack_max_length is an error.
    groups: optional group id per sample (e.g. the responses of one prompt);
        a group stays on one rank and in one step.
    workload: what balancing evens out: "tokens", "verl", "quadratic(a,b)" or
        a Workload. The cap is always on tokens.
    pad_to: "cap" (every pack to pack_max_length), "step_max" (every pack to
        the longest pack of its slot across ranks) or "none".
    pack_max_length: at most MAX_PACK_LENGTH (2^31 - 1): packs are
        materialized with int32 cu_seqlens.
    pad_chunk: the longest padding sequence; a pack's padding makes at most
        MAX_PADDING_SEQUENCES (2^20) of them, so pad_chunk must be at least
        pack_max_length / 2^20.
    seed: only decides which rank gets which part where ranks tie; the planner
        uses no randomness.

    A plan holds at most MAX_PLAN_LISTS (rank, step) pairs and packs; larger
    requests are refused before anything is allocated.

    Steps keep group counts within one of each other (a step is a mini-batch of
    about the same number of prompts). Within a step, ranks get even
    workloads; steps get even workloads too, unless a (rank, step) would hold
    about one group: steps are then formed from groups of similar workload, so
    that ranks stay even within a step (plan.notes says so).
    """
    values = as_int64_array(lengths, "lengths")
    seed = _as_int(seed, "seed", low=0, high=2**64 - 1)
    group_ids = None
    if groups is not None:
        group_ids = as_int64_array(groups, "groups", allow_negative=True)
        if group_ids.size != values.size:
            raise ValueError(
                f"groups has {group_ids.size} entries but lengths has {values.size}; "
                "give one group id per sample"
            )
    result = _seqflow.pack._plan(
        values,
        _as_int(dp_size, "dp_size"),
        _as_int(optimizer_steps, "optimizer_steps"),
        _as_int(pack_max_length, "pack_max_length"),
        group_ids,
        _as_workload(workload),
        str(pad_to),
        _as_int(pad_chunk, "pad_chunk"),
        seed,
    )
    return _to_plan(result, values)


def xtuner_baseline(
    lengths, *, dp_size: int, optimizer_steps: int, pack_max_length: int, pad_chunk: int = 1024
) -> PackPlan:
    """FOR COMPARISON ONLY: the pipeline xtuner's balanced-packing change
    describes (Karmarkar-Karp equal split over ranks, then over steps, then
    into ceil(tokens / cap) packs per (rank, step), every pack padded to the
    cap, pack counts padded across ranks). It fails where that pipeline asserts
    (counts that do not divide) and does not enforce the cap: see
    stats.packs_over_cap."""
    values = as_int64_array(lengths, "lengths")
    result = _seqflow.pack._xtuner_baseline(
        values,
        _as_int(dp_size, "dp_size"),
        _as_int(optimizer_steps, "optimizer_steps"),
        _as_int(pack_max_length, "pack_max_length"),
        _as_int(pad_chunk, "pad_chunk"),
    )
    return _to_plan(result, values)


def padding_sequences(padding: int, pad_chunk: int) -> list:
    """The lengths of the padding sequences that make up `padding` tokens (at
    most MAX_PACK_LENGTH, in at most MAX_PADDING_SEQUENCES sequences): full
    chunks of pad_chunk, then the remainder."""
    return _seqflow.pack._padding_sequences(_as_int(padding, "padding"), _as_int(pad_chunk, "pad_chunk"))


def inverse_permutation(order) -> np.ndarray:
    """inverse[order[i]] = i. For outputs laid out in `order` (a permutation of
    0..n-1), outputs[inverse] restores the original order."""
    return _seqflow.pack._inverse_permutation(as_int64_array(order, "order"))


# ---------------------------------------------------------------------------
# Micro-batches


@dataclass(frozen=True)
class MicroBatchPlan:
    """batches[rank][i] lists the sample indexes of micro-batch i of `rank`, in
    the planned order. tokens and workloads are per rank, per micro-batch.
    min_counts[rank] is the fewest micro-batches that rank alone needs under
    the cap; empty_batches counts micro-batches without samples (a rank with
    fewer samples than the common count)."""

    batches: list
    tokens: list
    workloads: list
    min_counts: np.ndarray
    empty_batches: int

    @property
    def counts(self) -> list:
        return [len(rank) for rank in self.batches]

    def __repr__(self) -> str:
        largest = max((max(rank, default=0) for rank in self.tokens), default=0)
        return (
            f"MicroBatchPlan(ranks={len(self.batches)}, micro_batches per rank={self.counts[0] if self.batches else 0}, "
            f"largest micro-batch={largest} tokens, empty_batches={self.empty_batches})"
        )

    def order(self, rank=None) -> np.ndarray:
        """Sample indexes in micro-batch order: of one rank, or of all ranks,
        rank by rank."""
        ranks = range(len(self.batches)) if rank is None else [_index(rank, "rank", len(self.batches))]
        flat = [index for r in ranks for batch in self.batches[r] for index in batch]
        return np.asarray(flat, dtype=np.int64)

    def restore_order(self, rank=None) -> np.ndarray:
        """Positions such that outputs[positions] lists the outputs of
        `order(rank)` by ascending sample index (the original order)."""
        order = self.order(rank)
        if order.size and order.max() == order.size - 1:
            return inverse_permutation(order)
        return np.argsort(order, kind="stable")


def _is_per_rank(lengths) -> bool:
    if not isinstance(lengths, (list, tuple)) or not lengths:
        return False
    first = lengths[0]
    return not isinstance(first, (int, np.integer)) and hasattr(first, "__len__")


def micro_batches(
    lengths,
    max_token_len: int,
    *,
    dp_size: int = 1,
    same_count_across_ranks: bool = True,
    count_multiple: int = 1,
    workload="tokens",
    order: str = "interleave",
) -> MicroBatchPlan:
    """Split samples into micro-batches of at most `max_token_len` tokens.

    lengths: either one 1-D sequence of all samples, which are first spread
        over dp_size ranks (balanced; indexes in the plan are global), or a list
        of one sequence per rank, already placed (indexes are local to the rank;
        dp_size may stay 1 and is then taken from the list).
    The count is the fewest for which the cap holds, the same on every rank
    when same_count_across_ranks, and a multiple of count_multiple (pipeline
    schedules). Micro-batches are balanced by `workload`. A plan of more than
    MAX_PLAN_LISTS micro-batches over all ranks is refused.
    order: "interleave" (largest, smallest, second largest, ...: shrinks
        pipeline bubbles), "descending" or "none".
    """
    cap = _as_int(max_token_len, "max_token_len")
    dp = _as_int(dp_size, "dp_size")
    args = (
        check_bool(same_count_across_ranks, "same_count_across_ranks"),
        _as_int(count_multiple, "count_multiple"),
        _as_workload(workload),
        str(order),
    )
    if _is_per_rank(lengths):
        per_rank = [as_int64_array(rank, f"lengths[{i}]") for i, rank in enumerate(lengths)]
        if dp == 1:
            dp = len(per_rank)
        result = _seqflow.pack._micro_batches_per_rank(per_rank, cap, dp, *args)
    else:
        result = _seqflow.pack._micro_batches(as_int64_array(lengths, "lengths"), cap, dp, *args)
    return MicroBatchPlan(**result)


# ---------------------------------------------------------------------------
# Materialising packs


class Ragged(NamedTuple):
    """Token ids of many samples in one flat array: sample i is
    values[offsets[i]:offsets[i + 1]]."""

    values: object
    offsets: object


@dataclass(frozen=True)
class PackedSequence:
    """One pack, ready for a varlen attention kernel.

    input_ids, labels, position_ids: flat, of the padded length; labels hold
    ignore_index on padding. cu_seqlens: int32 boundaries of the samples, then
    of the padding sequences. samples: the sample indexes in order.
    """

    input_ids: object
    labels: object
    position_ids: object
    cu_seqlens: object
    samples: tuple
    padding: int


def _samples_of(token_ids, name: str):
    """A function i -> 1-D numpy array of sample i's ids, and the count."""
    if isinstance(token_ids, Ragged):
        values = _id_array(token_ids.values, f"{name}.values")
        if values.ndim != 1:
            raise ValueError(f"{name}.values must be one-dimensional, got shape {values.shape}")
        offsets = as_int64_array(token_ids.offsets, f"{name}.offsets")
        if offsets.size == 0 or offsets[-1] > values.shape[0] or np.any(np.diff(offsets) < 0):
            raise ValueError(f"{name}.offsets must be ascending and within values")
        return (lambda i: values[offsets[i]:offsets[i + 1]]), offsets.size - 1
    if getattr(token_ids, "is_nested", False):  # torch nested tensor
        token_ids = token_ids.unbind()
    try:
        samples = list(token_ids)
    except TypeError:
        raise ValueError(
            f"{name} must be a list of 1-D arrays or tensors, a nested tensor or a Ragged, "
            f"got {type(token_ids).__name__}"
        ) from None
    arrays = [_id_array(sample, f"{name}[{i}]").reshape(-1) for i, sample in enumerate(samples)]
    return (lambda i: arrays[i]), len(arrays)


def _id_array(values, name: str) -> np.ndarray:
    """Token ids or labels as an int64 array (mixed dtypes would concatenate to
    float64). Float dtypes are refused even when the values are whole: float32
    holds integers exactly only up to 2^24, so ids that passed through a float
    may already be wrong."""
    if hasattr(values, "detach"):  # torch tensor
        if values.is_floating_point() or values.is_complex():
            raise ValueError(f"{name} has dtype {values.dtype}; token ids and labels must be integers")
        values = values.detach().cpu().numpy()
    try:
        array = np.asarray(values)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be an array of integer token ids: {error}") from None
    if array.dtype.kind not in "iu" and array.size:
        raise ValueError(f"{name} has dtype {array.dtype}; token ids and labels must be integers")
    if array.dtype.kind == "u" and array.size and array.max() > _INT64_MAX:
        raise ValueError(f"{name} holds {int(array.max())}, beyond the int64 range")
    return array.astype(np.int64, copy=False)


def materialize(
    plan: PackPlan,
    token_ids,
    *,
    rank: int | None = None,
    step: int | None = None,
    labels=None,
    pad_id: int = 0,
    ignore_index: int = -100,
    backend: str = "numpy",
):
    """Build the packed sequences of a plan.

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
    if rank is not None:
        rank = _index(rank, "rank", plan.dp_size)
    if step is not None:
        step = _index(step, "step", plan.optimizer_steps)
    pad_id = _as_int(pad_id, "pad_id")
    ignore_index = _as_int(ignore_index, "ignore_index")
    if backend not in ("numpy", "torch"):
        raise ValueError(f"backend must be 'numpy' or 'torch', got {backend!r}")
    if backend == "torch":
        try:
            import torch
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ImportError("backend='torch' needs torch installed") from error
        convert = torch.from_numpy
    else:
        convert = _identity
    ids_of, count = _samples_of(token_ids, "token_ids")
    if count != plan.lengths.size:
        raise ValueError(f"token_ids has {count} samples but the plan has {plan.lengths.size}")
    labels_of = ids_of
    if labels is not None:
        labels_of, label_count = _samples_of(labels, "labels")
        if label_count != count:
            raise ValueError(f"labels has {label_count} samples but token_ids has {count}")

    def build(r: int, s: int) -> list:
        out = []
        for slot, samples in enumerate(plan.packs[r][s]):
            pieces_ids, pieces_labels, sizes = [], [], []
            for i in samples:
                ids = ids_of(i)
                if ids.shape[0] != plan.lengths[i]:
                    raise ValueError(
                        f"token_ids[{i}] has {ids.shape[0]} tokens but the plan was made "
                        f"with length {int(plan.lengths[i])}"
                    )
                lab = labels_of(i)
                if lab.shape[0] != ids.shape[0]:
                    raise ValueError(f"labels[{i}] has {lab.shape[0]} entries, token_ids[{i}] {ids.shape[0]}")
                pieces_ids.append(ids)
                pieces_labels.append(lab)
                sizes.append(ids.shape[0])
            padding = plan.pack_padding[r][s][slot]
            pads = padding_sequences(padding, plan.pad_chunk)
            pieces_ids.append(np.full(padding, pad_id, dtype=np.int64))
            pieces_labels.append(np.full(padding, ignore_index, dtype=np.int64))
            sizes.extend(pads)
            input_ids = np.concatenate(pieces_ids).astype(np.int64, copy=False)
            label_ids = np.concatenate(pieces_labels).astype(np.int64, copy=False)
            bounds = np.zeros(len(sizes) + 1, dtype=np.int64)
            np.cumsum(sizes, out=bounds[1:])
            starts = np.repeat(bounds[:-1], sizes)
            position_ids = np.arange(bounds[-1], dtype=np.int64) - starts
            out.append(
                PackedSequence(
                    input_ids=convert(input_ids),
                    labels=convert(label_ids),
                    position_ids=convert(position_ids),
                    cu_seqlens=convert(bounds.astype(np.int32)),
                    samples=tuple(samples),
                    padding=padding,
                )
            )
        return out

    def build_rank(r: int):
        if step is not None:
            return build(r, step)
        return [build(r, s) for s in range(plan.optimizer_steps)]

    if rank is not None:
        return build_rank(rank)
    return [build_rank(r) for r in range(plan.dp_size)]


def _identity(array):
    return array
