"""The tasks: one thread per (task, rank), one StreamingDataset each."""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field

import numpy as np

from seqflow.demo.config import ACTOR_MICRO_BATCH, EMPTY_BATCH_SLEEP, LOG_PROB_MICRO_BATCH, TASK_FIELDS, Config
from seqflow.demo.progress import Progress
from seqflow.demo.rollout import partition_of


@dataclass
class RankRecord:
    global_indexes: list = field(default_factory=list)
    tokens: int = 0
    batches: int = 0
    mismatches: int = 0


def fake_log_prob(response_ids: np.ndarray) -> np.ndarray:
    """A stand-in for a model's per-token log-probabilities (cheap, deterministic)."""
    return (-0.01 * np.log1p(response_ids % 1024)).astype(np.float32)


def run_rank(client, config: Config, task: str, rank: int, records: list, finished: "queue.Queue",
             progress: Progress, stop: threading.Event) -> None:
    from seqflow import StreamingDataset

    dataset = StreamingDataset(
        batch_size=config.rank_batch_size(task),
        micro_batch_size=LOG_PROB_MICRO_BATCH if task == "log_prob" else ACTOR_MICRO_BATCH,
        data_fields=TASK_FIELDS[task], partition_id=partition_of(0), task_name=task, dp_rank=rank,
        should_check_consumption_status=True, total_samples=config.samples, client=client,
        data_format="numpy", empty_batch_sleep=EMPTY_BATCH_SLEEP, keep_batches=False)
    for step in range(config.steps):
        if step:
            dataset.step(partition_of(step))
        record: RankRecord = records[step][task][rank]
        for data, meta in dataset:
            if stop.is_set():
                return
            ids = data["input_ids"]
            for i, entry in enumerate(meta.custom_meta):
                if len(ids[i]) != entry["total_lengths"] or int(ids[i][0]) != entry["uid"]:
                    record.mismatches += 1
            if task == "log_prob":
                log_probs = [fake_log_prob(ids[i][len(ids[i]) - entry["response_length"]:])
                             for i, entry in enumerate(meta.custom_meta)]
                client.put({"old_log_prob": log_probs}, metadata=meta)
            else:
                for i, entry in enumerate(meta.custom_meta):
                    if len(data["old_log_prob"][i]) != entry["response_length"]:
                        record.mismatches += 1
            record.global_indexes.extend(meta.global_indexes)
            record.tokens += sum(int(m["total_lengths"]) for m in meta.custom_meta)
            record.batches += 1
            progress.update(meta.size)
        finished.put((step, task, rank))

