"""The two splits seqflow is compared with. Each returns, per DP rank, the
sample positions (into the rollout's arrival order) it trains on; every
rank gets as many samples."""

from __future__ import annotations

import numpy as np

import seqflow.balance as sb


def naive_split(samples: int, ranks: int) -> list[np.ndarray]:
    """Contiguous equal-count chunks in arrival order: what SequentialSampler
    or a plain DistributedSampler without shuffling hands out."""
    return np.array_split(np.arange(samples, dtype=np.int64), ranks)


def karmarkar_karp_split(lengths: np.ndarray, ranks: int) -> list[np.ndarray]:
    """verl's _balance_batch: Karmarkar-Karp on token counts, as many samples
    per rank (seqflow's bit-identical get_seqlen_balanced_partitions)."""
    parts = sb.get_seqlen_balanced_partitions(lengths.tolist(), k_partitions=ranks, equal_size=True)
    return [np.asarray(sorted(part), dtype=np.int64) for part in parts]
