"""Rollouts for the training benchmark: GRPO groups (the responses of one
prompt share its prompt and stay together) with long-tailed response
lengths, every sample clipped at the longest sequence the model takes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DISTRIBUTIONS = ("lognormal", "bimodal")


@dataclass(frozen=True)
class Rollout:
    lengths: np.ndarray  # int64 tokens per sample (prompt + response)
    groups: np.ndarray  # int64 prompt id per sample; a group's samples are adjacent
    token_ids: list  # one int64 array of random ids per sample

    @property
    def tokens(self) -> int:
        return int(self.lengths.sum())


def response_lengths(dist: str, count: int, max_length: int, rng: np.random.Generator) -> np.ndarray:
    """Long-tailed response lengths: lognormal (median max_length / 5), or a
    bimodal mix of short answers and long reasoning traces (30%) around
    0.85 * max_length, so that many of those are clipped at max_length."""
    if dist == "lognormal":
        values = rng.lognormal(mean=np.log(max_length / 5), sigma=1.0, size=count)
    elif dist == "bimodal":
        long = rng.random(count) < 0.3
        short = rng.normal(max_length / 10, max_length / 40, count)
        values = np.where(long, rng.normal(0.85 * max_length, max_length / 8, count), short)
    else:
        raise ValueError(f"dist must be one of {DISTRIBUTIONS}, got {dist!r}")
    return np.rint(values).astype(np.int64)


def make_rollout(dist: str, prompts: int, group_size: int, max_length: int, vocab: int,
                 rng: np.random.Generator) -> Rollout:
    """prompts * group_size samples; each length = its prompt's length (16 to
    max_length / 16) + a response length, clipped to 1..max_length."""
    prompt_lengths = np.repeat(rng.integers(16, max(17, max_length // 16), size=prompts, endpoint=True), group_size)
    responses = response_lengths(dist, prompts * group_size, max_length, rng)
    lengths = np.clip(prompt_lengths + responses, 1, max_length).astype(np.int64)
    groups = np.repeat(np.arange(prompts, dtype=np.int64), group_size)
    token_ids = [rng.integers(0, vocab, size=int(length), dtype=np.int64) for length in lengths]
    return Rollout(lengths, groups, token_ids)
