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

Every name here is bound from C++ (python/bindings/pack_bindings.cc;
include/seqflow/pack.h, packed_sequence.h): PackPlan, PackStats,
MicroBatchPlan and PackedSequence are the C++ objects with read-only
properties. MAX_PACK_LENGTH (2^31 - 1, as packs carry int32 cu_seqlens) is the
largest pack_max_length and padding; MAX_PADDING_SEQUENCES the most padding
sequences in one pack; MAX_PLAN_LISTS the most (rank, step) pairs, packs or
micro-batches a plan may hold.
"""

from seqflow._seqflow.pack import (
    MAX_PACK_LENGTH,
    MAX_PADDING_SEQUENCES,
    MAX_PLAN_LISTS,
    MicroBatchPlan,
    PackedSequence,
    PackPlan,
    PackStats,
    Ragged,
    inverse_permutation,
    materialize,
    micro_batches,
    padding_sequences,
    plan,
    xtuner_baseline,
)

__all__ = [
    "MAX_PACK_LENGTH", "MAX_PADDING_SEQUENCES", "MAX_PLAN_LISTS", "MicroBatchPlan", "PackPlan", "PackStats",
    "PackedSequence", "Ragged", "inverse_permutation", "materialize", "micro_batches", "padding_sequences", "plan",
    "xtuner_baseline",
]
