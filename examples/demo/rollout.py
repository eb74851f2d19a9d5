"""One training step's rollout: prompts x responses samples (GRPO groups: a
prompt's responses side by side) with long-tailed lengths, in arrival order.

The length model is a production one (prompts of 100-1,500 tokens,
responses lognormal with median 1,500 and sigma 1, capped at 16k) scaled
down LENGTH_SCALE times, so that a CPU trains a step in seconds."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LENGTH_SCALE = 11
MIN_PROMPT = 100 // LENGTH_SCALE
MAX_PROMPT = 1500 // LENGTH_SCALE
MEDIAN_RESPONSE = 1500 / LENGTH_SCALE
RESPONSE_SIGMA = 1.0
MAX_LENGTH = 16384 // LENGTH_SCALE  # the longest sample, prompt + response


@dataclass(frozen=True)
class Rollout:
    lengths: np.ndarray  # int64 tokens per sample (prompt + response), in arrival order
    groups: np.ndarray  # int64 prompt per sample
    token_ids: list  # one int64 array per sample

    @property
    def tokens(self) -> int:
        return int(self.lengths.sum())


def make_rollout(rng: np.random.Generator, prompts: int, responses: int) -> Rollout:
    prompt = np.repeat(rng.integers(MIN_PROMPT, MAX_PROMPT, size=prompts, endpoint=True), responses)
    response = np.rint(MEDIAN_RESPONSE * np.exp(RESPONSE_SIGMA * rng.standard_normal(prompts * responses)))
    lengths = np.clip(prompt + response, 1, MAX_LENGTH).astype(np.int64)
    groups = np.repeat(np.arange(prompts, dtype=np.int64), responses)
    token_ids = [rng.integers(0, 2**15, size=int(n), dtype=np.int64) for n in lengths]
    return Rollout(lengths, groups, token_ids)
