"""The rollout: per step, prompts x responses samples with long-tailed lengths, written by a producer thread."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from seqflow.demo.config import (MAX_PROMPT, MAX_RESPONSE, MEDIAN_RESPONSE, MIN_PROMPT, PROMPTS_PER_PUT, RESPONSE_SIGMA,
                                  Config)


@dataclass
class StepRollout:
    """What the producer wrote for one step, in arrival (put) order."""

    prompt_lengths: np.ndarray    # per prompt
    response_lengths: np.ndarray  # per sample, prompt-major
    global_indexes: list = field(default_factory=list)

    @property
    def total_lengths(self) -> np.ndarray:
        return np.repeat(self.prompt_lengths, len(self.response_lengths) // len(self.prompt_lengths)) \
            + self.response_lengths


def make_rollout(rng: np.random.Generator, prompts: int, responses: int) -> StepRollout:
    prompt = rng.integers(MIN_PROMPT, MAX_PROMPT, size=prompts, endpoint=True)
    drawn = MEDIAN_RESPONSE * np.exp(RESPONSE_SIGMA * rng.standard_normal(prompts * responses))
    response = np.clip(np.rint(drawn), 1, MAX_RESPONSE).astype(np.int64)
    return StepRollout(prompt.astype(np.int64), response)


def partition_of(step: int) -> str:
    return f"train@global_step_{step}"


def produce(client, config: Config, rollouts: list, stop: threading.Event) -> None:
    """Writes each step's samples, PROMPTS_PER_PUT prompts (whole groups) per put."""
    rng = np.random.default_rng([config.seed, 1])
    n = config.responses
    for step, rollout in enumerate(rollouts):
        uid = 0
        for first in range(0, config.prompts, PROMPTS_PER_PUT):
            if stop.is_set():
                return
            rows, meta = [], []
            for p in range(first, min(first + PROMPTS_PER_PUT, config.prompts)):
                prompt_len = int(rollout.prompt_lengths[p])
                prompt_ids = rng.integers(3, 32000, size=prompt_len)
                for r in range(n):
                    response_len = int(rollout.response_lengths[p * n + r])
                    ids = np.concatenate([prompt_ids, rng.integers(3, 32000, size=response_len)])
                    ids[0] = uid  # lets the readers check that data and metadata agree
                    rows.append(ids)
                    meta.append({"total_lengths": prompt_len + response_len, "group_id": step * config.prompts + p,
                                 "response_length": response_len, "uid": uid})
                    uid += 1
            put = client.put({"input_ids": rows}, partition_id=partition_of(step), custom_meta=meta)
            rollout.global_indexes.extend(put.global_indexes)
            time.sleep(0.002)  # generation takes time: readers start before the step is complete

