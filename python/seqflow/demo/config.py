"""The demo's command line: options, their checks and the run's Config; the length model."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

MIN_PROMPT = 100
MAX_PROMPT = 1500
MEDIAN_RESPONSE = 1500.0
RESPONSE_SIGMA = 1.0
MAX_RESPONSE = 16384
PROMPTS_PER_PUT = 4          # a rollout worker returns a few prompts' groups at a time
LOG_PROB_MICRO_BATCH = 8     # samples per log_prob forward pass
ACTOR_MICRO_BATCH = 16
EMPTY_BATCH_SLEEP = 0.005    # seconds a rank waits when nothing is ready
STEP_TIMEOUT = 300.0         # seconds without a finished step before the demo gives up
TASKS = ("log_prob", "update_actor")
TASK_FIELDS = {"log_prob": ["input_ids"], "update_actor": ["input_ids", "old_log_prob"]}


def _integer(minimum: int):
    """An argparse type: an integer >= minimum."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


_positive = _integer(1)
_non_negative = _integer(0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m seqflow demo",
        description="A GRPO pipeline in one process: a rollout producer, a log-prob task and an actor-update "
                    "task over simulated DP ranks, balanced by SeqlenBalancedSampler.",
        epilog="example: python -m seqflow demo --steps 2 --prompts 32 --ranks 4 --seed 7")
    parser.add_argument("--steps", type=_positive, default=4, help="training steps, one partition each (default 4)")
    parser.add_argument("--prompts", type=_positive, default=64,
                        help="prompts per step, a multiple of --ranks (default 64)")
    parser.add_argument("--responses", type=_positive, default=8,
                        help="responses per prompt, the GRPO group size (default 8)")
    parser.add_argument("--ranks", type=_positive, default=8, help="simulated data-parallel ranks (default 8)")
    parser.add_argument("--seed", type=_non_negative, default=0, help="seed of the length generator (default 0)")
    parser.add_argument("--report", default="out/demo_report.json",
                        help="where to write the JSON report (default out/demo_report.json)")
    parser.add_argument("--png", default="out/demo_load.png",
                        help="where to draw the per-rank load chart when matplotlib is installed "
                             "(default out/demo_load.png)")
    parser.add_argument("--optimizer-steps", type=_positive, default=2,
                        help="optimizer steps per training step in the pack plan (default 2)")
    parser.add_argument("--pack-max-length", type=_positive, default=32768,
                        help=f"token cap of a pack, >= {MAX_PROMPT + MAX_RESPONSE} (default 32768)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


@dataclass
class Config:
    steps: int
    prompts: int
    responses: int
    ranks: int
    seed: int
    report: Path
    png: Path
    optimizer_steps: int
    pack_max_length: int
    progress: bool

    @property
    def samples(self) -> int:
        return self.prompts * self.responses

    def batches_per_step(self, task: str) -> int:
        """log_prob: two global batches per step when the prompts allow it
        (it starts while the rollout is still written); update_actor: one."""
        if task == "log_prob" and self.prompts % (2 * self.ranks) == 0:
            return 2
        return 1

    def rank_batch_size(self, task: str) -> int:
        return self.samples // (self.ranks * self.batches_per_step(task))


def parse_config(argv) -> Config:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.prompts % args.ranks != 0:
        parser.error(f"--prompts ({args.prompts}) must be a multiple of --ranks ({args.ranks}) "
                     "so every rank gets the same number of prompts")
    if args.pack_max_length < MAX_PROMPT + MAX_RESPONSE:
        parser.error(f"--pack-max-length ({args.pack_max_length}) must hold the longest sample, "
                     f"{MAX_PROMPT + MAX_RESPONSE} tokens")
    if args.prompts * args.responses > 1_000_000:
        parser.error("--prompts x --responses must be at most 1,000,000 samples per step")
    return Config(args.steps, args.prompts, args.responses, args.ranks, args.seed, Path(args.report),
                  Path(args.png), args.optimizer_steps, args.pack_max_length, not args.no_progress)

