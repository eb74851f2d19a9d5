"""A stand-in for the actor's forward and backward pass over one micro-batch:
numpy work per token (the MLP's share) and per pair of tokens (attention's
L^2), so a sequence's cost grows faster than its length, as on real
hardware. Timed in the rank thread's own CPU time, which other threads on
the same cores do not inflate."""

from __future__ import annotations

import time

import numpy as np

from seqflow.demo.config import MAX_PROMPT, MAX_RESPONSE

FEATURES_PER_TOKEN = 192  # element-wise work per token
ATTENTION_STRIDE = 4     # one attention row per this many tokens: (L / stride)^2 pair work
TILE_ROWS = 16           # attention rows per tile (16 x 4,471 doubles: 572 KB)
_LONGEST = MAX_PROMPT + MAX_RESPONSE


class StandInTrainer:
    """One per rank thread: its own buffers, touched once here, so that no
    timed call pays for first-touch page faults or shares cache lines with
    another rank."""

    def __init__(self):
        self.inputs = np.linspace(0.0, 1.0, _LONGEST * FEATURES_PER_TOKEN)
        self.token_outputs = np.zeros(self.inputs.size)
        self.tile = np.zeros((TILE_ROWS, _LONGEST // ATTENTION_STRIDE))

    def _sequence(self, length: int) -> None:
        length = min(length, _LONGEST)
        n = length * FEATURES_PER_TOKEN
        np.tanh(self.inputs[:n], out=self.token_outputs[:n])
        m = max(1, length // ATTENTION_STRIDE)
        columns = self.inputs[:m]
        # Attention in tiles of TILE_ROWS query rows, small enough to stay in
        # the core's cache: the pair work is compute, not memory traffic that
        # the other threads' traffic would slow down.
        for first in range(0, m, TILE_ROWS):
            rows = self.inputs[first:min(first + TILE_ROWS, m)]
            tile = self.tile[:len(rows), :m]
            np.multiply.outer(rows, columns, out=tile)
            np.exp(tile, out=tile)

    def train(self, lengths) -> float:
        """Runs the stand-in over the micro-batch's sequence lengths; returns
        the CPU seconds this thread spent."""
        start = time.thread_time()
        for length in lengths:
            self._sequence(int(length))
        return time.thread_time() - start
