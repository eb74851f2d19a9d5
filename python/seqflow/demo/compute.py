"""A stand-in for the actor's forward and backward pass over one micro-batch:
numpy work per token and per pair of tokens (attention's L^2), so a
sequence's cost grows faster than its length, as on real hardware. Timed in
the rank thread's own CPU time, which other threads on the same cores do not
inflate."""

from __future__ import annotations

import time

import numpy as np

FEATURES_PER_TOKEN = 24   # element-wise work per token (the MLP's share)
ATTENTION_STRIDE = 8      # one attention row per this many tokens: (L / stride)^2 pair work
_SCRATCH = np.linspace(0.0, 1.0, 1 << 20)


def _sequence(length: int) -> float:
    tokens = _SCRATCH[: min(length * FEATURES_PER_TOKEN, _SCRATCH.size)]
    work = float(np.tanh(tokens).sum())
    rows = _SCRATCH[: max(1, length // ATTENTION_STRIDE)]
    return work + float(np.add.outer(rows, rows).max())


def train_micro_batch(lengths) -> float:
    """Runs the stand-in over the micro-batch's sequence lengths; returns the
    CPU seconds this thread spent."""
    start = time.thread_time()
    for length in lengths:
        _sequence(int(length))
    return time.thread_time() - start
