"""The demo's command line: its options, their checks, and the run's Config."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from rollout import MAX_LENGTH

MAX_SAMPLES = 16384  # per step: every sample is trained three times, on one core


def _integer(minimum: int, why: str = ""):
    """An argparse type: an integer >= minimum (`why`: what the minimum is)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}{f' ({why})' if why else ''}, got {value}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grpo_balance_demo.py",
        description="One GRPO rollout per step, split over DP ranks three ways (naive, Karmarkar-Karp on tokens, "
                    "seqflow), each rank's share trained on a small CPU transformer and timed.",
        epilog="example: python examples/demo/grpo_balance_demo.py --steps 2 --prompts 32 --ranks 4 --seed 7")
    parser.add_argument("--steps", type=_integer(1), default=3, help="training steps (default 3)")
    parser.add_argument("--prompts", type=_integer(1), default=64,
                        help="prompts per step, a multiple of --ranks (default 64)")
    parser.add_argument("--responses", type=_integer(1), default=4,
                        help="responses per prompt, the GRPO group size (default 4)")
    parser.add_argument("--ranks", type=_integer(2), default=8, help="data-parallel ranks (default 8)")
    parser.add_argument("--seed", type=_integer(0), default=0, help="seed of the lengths and the model (default 0)")
    parser.add_argument("--workload", choices=("online", "tokens"), default="online",
                        help="what seqflow balances: 'online' (default) the seconds its controller's model predicts, "
                             "fitted to the timings the ranks report, or 'tokens'")
    parser.add_argument("--micro-batch-tokens", type=_integer(MAX_LENGTH, "the longest sample"), default=MAX_LENGTH,
                        help=f"token cap of a micro-batch, at least the longest sample (default {MAX_LENGTH})")
    parser.add_argument("--report", default="out/demo_report.json",
                        help="where to write the JSON report (default out/demo_report.json)")
    parser.add_argument("--png", default="out/demo_ranks.png",
                        help="where to draw the per-rank time chart when matplotlib is installed "
                             "(default out/demo_ranks.png)")
    return parser


@dataclass(frozen=True)
class Config:
    steps: int
    prompts: int
    responses: int
    ranks: int
    seed: int
    workload: str
    micro_batch_tokens: int
    report: Path
    png: Path

    @property
    def samples(self) -> int:
        return self.prompts * self.responses


def parse_config(argv) -> Config:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.prompts % args.ranks != 0:
        parser.error(f"--prompts ({args.prompts}) must be a multiple of --ranks ({args.ranks}) "
                     "so every rank gets as many whole prompts")
    if args.prompts * args.responses > MAX_SAMPLES:
        parser.error(f"--prompts x --responses ({args.prompts} x {args.responses}) must be at most {MAX_SAMPLES:,} "
                     "samples per step")
    return Config(args.steps, args.prompts, args.responses, args.ranks, args.seed, args.workload,
                  args.micro_batch_tokens, Path(args.report), Path(args.png))
