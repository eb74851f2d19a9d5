"""seqflow's side of the demo: the rollout goes through seqflow's embedded
data system (put -> get_meta -> get_data), whose SeqlenBalancedSampler
splits each step over the DP ranks by the actor's measured time
(workload="online"): the controller fits a cost model in seconds to the
micro-batch timings the ranks report, and balances its predictions."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

import seqflow
from rollout import Rollout

TASK = "update_actor"
FIT_DEADLINE = 60.0  # seconds for the controller's first fit, which runs in the background
FIT_POLL = 0.01


def partition_of(step: int) -> str:
    return f"train@step_{step}"


@dataclass
class StreamedStep:
    """What the ranks read from seqflow in one step."""

    positions: list  # per rank: the sample positions (arrival order) it was handed
    token_ids: list  # per rank: the input_ids get_data returned, one array per sample
    exactly_once: bool  # every sample handed to exactly one rank, and the controller agrees
    data_mismatches: int  # samples whose data is not what was put


class BalancedStream:
    def __init__(self, responses: int, ranks: int, workload: str):
        """workload: "online" (the controller's model of the task) or "tokens"."""
        self.ranks = ranks
        sampler = seqflow.SeqlenBalancedSampler(n_samples_per_prompt=responses, dp_size=ranks, workload=workload)
        self.client = seqflow.Client(sampler)

    def __enter__(self) -> BalancedStream:
        return self

    def __exit__(self, *exc) -> None:
        self.client.close()

    def report(self, records: list) -> None:
        """(lengths, seconds) of timed micro-batches: the controller refits on them."""
        self.client.report_timings(TASK, records)

    def wait_for_fit(self) -> None:
        """Until the controller has fitted its first model of the task (fits run in the background)."""
        deadline = time.monotonic() + FIT_DEADLINE
        while True:
            model = self.client.task_workload(TASK)
            if model is not None and model.fitted:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the controller fitted no model of {TASK} within {FIT_DEADLINE:.0f} s "
                                   f"({0 if model is None else model.reports} timings reported)")
            time.sleep(FIT_POLL)

    def model(self):
        """The controller's current model of the task."""
        return self.client.task_workload(TASK).workload

    def step(self, step: int, rollout: Rollout) -> StreamedStep:
        """Puts the rollout into the step's partition; each rank in turn asks
        for its share (the first ask reserves the whole batch and splits it)."""
        partition = partition_of(step)
        samples = len(rollout.lengths)
        put = self.client.put({"input_ids": rollout.token_ids}, partition_id=partition,
                              custom_meta=[{"total_lengths": int(n), "position": i}
                                           for i, n in enumerate(rollout.lengths)])
        positions, token_ids, handed_out = [], [], []
        mismatches = 0
        for rank in range(self.ranks):
            meta = self.client.get_meta(["input_ids"], batch_size=samples // self.ranks, partition_id=partition,
                                        task_name=TASK, sampling_config={"dp_rank": rank, "batch_index": 0})
            ids = self.client.get_data(meta, format="numpy")["input_ids"]
            rank_positions = [int(entry["position"]) for entry in meta.custom_meta]
            mismatches += sum(not np.array_equal(got, rollout.token_ids[p]) for got, p in zip(ids, rank_positions))
            positions.append(np.asarray(rank_positions, dtype=np.int64))
            token_ids.append(list(ids))
            handed_out += list(meta.global_indexes)
        exactly_once = (sorted(handed_out) == sorted(put.global_indexes)
                        and bool(self.client.check_consumption_status(TASK, partition)))
        self.client.clear_partition(partition)  # the step is trained: release its samples
        return StreamedStep(positions, token_ids, exactly_once, mismatches)
