"""Before step 0: micro-batches of 1-4 sequences of the rollouts' lengths,
trained and timed, so that torch's first calls and the heap's growth are
paid outside the steps, and the controller has timings to fit its first
model of the task on."""

from __future__ import annotations

import numpy as np

from model import TinyCausalLM, train_seconds
from rollout import MAX_LENGTH, make_rollout

TIMED = 32  # micro-batches reported to the controller (it fits from 16 on)
UNTIMED = 2  # the first ones, at the longest length: torch's first calls, the heap grown to its largest


def warm_up(model: TinyCausalLM, rng: np.random.Generator) -> list:
    """(lengths, seconds) of the timed micro-batches."""
    rollout = make_rollout(rng, TIMED * 4, 1)
    for _ in range(UNTIMED):
        train_seconds(model, [rng.integers(0, 2**15, size=MAX_LENGTH)])
        model.zero_grad(set_to_none=True)
    records = []
    for _ in range(TIMED):
        batch = [rollout.token_ids[p] for p in rng.choice(len(rollout.lengths), size=rng.integers(1, 5),
                                                          replace=False)]
        records.append(([len(s) for s in batch], train_seconds(model, batch)))
        model.zero_grad(set_to_none=True)
    return records
