"""How a step's rank shares are timed, on one core: every micro-batch of
every method's ranks twice, one at a time, all of them in a random order.
A slow spell of the machine (other processes share its cores and caches)
then lands on a few micro-batches of many ranks, not on the one rank that
ran then, and a micro-batch counts with its faster run: a spell slows a
run, never speeds one up. How far a rank's two sums of runs differ is the
measurement's noise."""

from __future__ import annotations

import gc
from dataclasses import dataclass

import numpy as np

from model import TinyCausalLM, train_seconds

RUNS = 2  # of every micro-batch


@dataclass
class StepTimes:
    runs: dict  # method -> per rank -> per micro-batch: (lengths, [seconds of each run])

    def records(self, method: str) -> list:
        """(lengths, seconds) of every micro-batch of the method's ranks, its faster run."""
        return [(lengths, min(seconds)) for rank in self.runs[method] for lengths, seconds in rank]

    def seconds(self, method: str) -> list:
        """Per rank: the sum of its micro-batches' faster runs."""
        return [sum(min(seconds) for _, seconds in rank) for rank in self.runs[method]]

    def run_pairs(self, method: str) -> list:
        """Per rank: (sum of the first runs, sum of the second runs)."""
        return [tuple(sum(seconds[run] for _, seconds in rank) for run in range(RUNS)) for rank in self.runs[method]]


def time_step(model: TinyCausalLM, works: dict, rng: np.random.Generator) -> StepTimes:
    """works: method -> per rank its RankWork."""
    keys = [(method, rank, i) for method, ranks in works.items()
            for rank, work in enumerate(ranks) for i in range(len(work.micro_batches))]
    seconds = {key: [] for key in keys}
    gc.collect()
    gc.disable()  # a collection inside a timed micro-batch would add to that rank alone
    try:
        for at in rng.permutation(RUNS * len(keys)) % len(keys):
            method, rank, i = keys[at]
            seconds[keys[at]].append(train_seconds(model, works[method][rank].micro_batches[i]))
            model.zero_grad(set_to_none=True)  # every micro-batch starts alike
    finally:
        gc.enable()
    return StepTimes({method: [[([len(s) for s in batch], seconds[method, rank, i])
                                for i, batch in enumerate(work.micro_batches)] for rank, work in enumerate(ranks)]
                      for method, ranks in works.items()})
