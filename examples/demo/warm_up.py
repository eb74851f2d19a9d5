"""Before step 0: micro-batches of 1-4 sequences, trained and timed, so that
torch's first calls and the heap's growth are paid outside the steps, and
the controller has timings to fit its first model of the task on. Their
lengths are spread evenly on a log scale up to the longest sample: the
rollouts' own lengths would seldom show the fit the long sequences, whose
attention sets the quadratic term."""

from __future__ import annotations

import numpy as np

from model import TinyCausalLM, train_seconds
from rollout import MAX_LENGTH

TIMED = 32  # micro-batches reported to the controller (it fits from 16 on)
UNTIMED = 2  # the first ones, at the longest length: torch's first calls, the heap grown to its largest
SHORTEST = 16


def warm_up(model: TinyCausalLM, rng: np.random.Generator) -> list:
    """(lengths, seconds) of the timed micro-batches."""
    for _ in range(UNTIMED):
        train_seconds(model, [rng.integers(0, 2**15, size=MAX_LENGTH)])
        model.zero_grad(set_to_none=True)
    records = []
    for _ in range(TIMED):
        lengths = np.exp(rng.uniform(np.log(SHORTEST), np.log(MAX_LENGTH), size=rng.integers(1, 5))).astype(np.int64)
        batch = [rng.integers(0, 2**15, size=n) for n in lengths]
        records.append((lengths.tolist(), train_seconds(model, batch)))
        model.zero_grad(set_to_none=True)
    return records
