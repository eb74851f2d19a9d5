"""How much of a measured idle is noise: rank shares timed twice differ by
the machine's noise, and even a perfectly balanced step shows some idle from
it (its slowest rank is the largest of several noisy times)."""

from __future__ import annotations

import numpy as np

DRAWS = 20000


def rank_noise(pairs: list) -> float:
    """The relative standard deviation of one rank time, from (first, again)
    timings of the same shares: their log ratio's sd over sqrt(2)."""
    if len(pairs) < 2:
        return float("nan")
    ratios = np.log([again / first for first, again in pairs])
    return float(np.std(ratios, ddof=1) / np.sqrt(2))


def idle_from_noise(noise: float, ranks: int, seed: int = 0) -> float:
    """The mean idle (1 - mean/max) of `ranks` equal shares timed with this
    relative noise."""
    if not np.isfinite(noise):
        return float("nan")
    draws = np.random.default_rng(seed).normal(1.0, noise, size=(DRAWS, ranks))
    return float(np.mean(1 - draws.mean(axis=1) / draws.max(axis=1)))
