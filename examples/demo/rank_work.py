"""A DP rank's work in a step: its samples cut into micro-batches under a
token cap (verl's dynamic batch size, through seqflow.pack.micro_batches:
the same count on every rank)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import seqflow.pack as sp


@dataclass
class RankWork:
    micro_batches: list  # lists of the rank's sequences (token id arrays), one per micro-batch

    @property
    def tokens(self) -> int:
        return sum(len(s) for batch in self.micro_batches for s in batch)

    def lengths(self) -> list:
        return [[len(s) for s in batch] for batch in self.micro_batches]


def rank_works(token_ids: list, micro_batch_tokens: int) -> list[RankWork]:
    """token_ids: per rank, its sequences."""
    plan = sp.micro_batches([[len(s) for s in rank] for rank in token_ids], max_token_len=micro_batch_tokens)
    return [RankWork([[rank[i] for i in batch] for batch in batches])
            for rank, batches in zip(token_ids, plan.batches)]


def predicted_seconds(workload, work: RankWork) -> float:
    """What a calibrated model predicts the rank's micro-batches take."""
    return float(sum(workload.seconds(lengths) for lengths in work.lengths()))


def idle(seconds) -> float:
    """The share of a synchronous step the ranks wait for the slowest: 1 - mean / max."""
    seconds = np.asarray(seconds, dtype=np.float64)
    return float(1 - seconds.mean() / seconds.max())
