#!/usr/bin/env python3
"""Pack planning benchmark: seqflow.pack.plan beside the xtuner baseline.

    python bench/pack_bench.py [--rollouts 20]

The baseline is the pipeline xtuner's balanced-packing change describes
(Karmarkar-Karp equal split over ranks, then over optimizer steps, then into
ceil(tokens / cap) packs per (rank, step); every pack padded to the cap with
padding sequences of at most 1024 tokens; pack counts padded across ranks),
implemented in C++ as seqflow.pack.xtuner_baseline, for comparison only.

Lengths: a prompt of 100-1,500 tokens (uniform) plus a lognormal response
(median 1,500, sigma 1) capped at 16,384, from numpy's default_rng with fixed
seeds. Each case runs --rollouts batches; the table shows the worst case over
them (steps, largest pack, spread) and the mean padding. Prints PASS/FAIL
lines for the targets, all measured in this one run.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from seqflow import pack

SEED = 20251122
PAD_CHUNK = 1024


def rollout_lengths(rng: np.random.Generator, n: int) -> np.ndarray:
    prompt = rng.integers(100, 1501, n)
    response = np.minimum(rng.lognormal(np.log(1500.0), 1.0, n), 16384).astype(np.int64)
    return prompt + response


@dataclass
class Case:
    samples: int
    dp: int
    steps: int
    cap: int


@dataclass
class Row:
    """Worst case over the rollouts of one planner on one case."""

    planner: str
    runs: int = 0
    failed: int = 0
    exact_steps: int = 0
    runs_over_cap: int = 0
    packs_over_cap: int = 0
    largest: int = 0
    spread: float = 0.0
    padding: list = None
    packs: list = None
    best_ms: float = float("inf")

    def add(self, plan: pack.PackPlan, steps: int, ms: float) -> None:
        s = self.padding if self.padding is not None else []
        self.padding = s + [plan.stats.padding_ratio]
        self.packs = (self.packs or []) + [int(plan.stats.packs_per_step.sum())]
        self.runs += 1
        self.exact_steps += all(len(rank) == steps for rank in plan.packs)
        self.runs_over_cap += plan.stats.packs_over_cap > 0
        self.packs_over_cap += plan.stats.packs_over_cap
        self.largest = max(self.largest, plan.stats.max_pack_tokens)
        self.spread = max(self.spread, float(plan.stats.token_spread.max()))
        self.best_ms = min(self.best_ms, ms)

    @property
    def mean_padding(self) -> float:
        return float(np.mean(self.padding)) if self.padding else float("nan")


def timed(function):
    start = time.perf_counter()
    result = function()
    return result, (time.perf_counter() - start) * 1e3


PLANNERS = {
    "seqflow pad_to=cap": lambda L, c: pack.plan(
        L, dp_size=c.dp, optimizer_steps=c.steps, pack_max_length=c.cap, pad_to="cap"),
    "seqflow pad_to=step_max": lambda L, c: pack.plan(
        L, dp_size=c.dp, optimizer_steps=c.steps, pack_max_length=c.cap, pad_to="step_max"),
    "xtuner baseline": lambda L, c: pack.xtuner_baseline(
        L, dp_size=c.dp, optimizer_steps=c.steps, pack_max_length=c.cap, pad_chunk=PAD_CHUNK),
}


def run_case(case: Case, rollouts: int) -> dict:
    rows = {name: Row(name) for name in PLANNERS}
    for rollout in range(rollouts):
        rng = np.random.default_rng([SEED, case.samples, rollout])
        lengths = rollout_lengths(rng, case.samples)
        for name, planner in PLANNERS.items():
            try:
                plan, ms = timed(lambda: planner(lengths, case))
            except ValueError:
                rows[name].runs += 1
                rows[name].failed += 1
                continue
            rows[name].add(plan, case.steps, ms)
    return rows


def print_table(case: Case, rows: dict, rollouts: int) -> None:
    print(f"\n{case.samples:,} samples, dp {case.dp}, {case.steps} steps, cap {case.cap:,}; "
          f"{rollouts} rollouts (worst case, mean padding)")
    header = ("planner", "exact steps", "over cap (runs/packs)", "largest pack", "max spread",
              "padding", "packs/rollout", "best ms")
    lines = [header]
    for row in rows.values():
        if not row.packs:
            lines.append((row.planner, f"0/{row.runs} ({row.failed} failed)") + ("-",) * (len(header) - 2))
            continue
        lines.append((
            row.planner,
            f"{row.exact_steps}/{row.runs}" + (f" ({row.failed} failed)" if row.failed else ""),
            f"{row.runs_over_cap}/{row.packs_over_cap}",
            f"{row.largest:,}",
            f"{100 * row.spread:.3f}%",
            f"{100 * row.mean_padding:.2f}%",
            f"{min(row.packs)}..{max(row.packs)}" if row.packs else "-",
            f"{row.best_ms:.2f}",
        ))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        cells = [line[0].ljust(widths[0])] + [cell.rjust(w) for cell, w in zip(line[1:], widths[1:])]
        print("  ".join(cells))


def check_targets(case: Case, rows: dict, results: list) -> None:
    cap, step_max, base = (rows[name] for name in PLANNERS)
    label = f"{case.samples} samples, dp {case.dp}, {case.steps} steps, cap {case.cap}"
    results.append((f"{label}: exactly {case.steps} steps in every rollout",
                    cap.exact_steps == cap.runs and step_max.exact_steps == step_max.runs))
    results.append((f"{label}: no pack over the cap", cap.packs_over_cap == 0 and step_max.packs_over_cap == 0))
    results.append((f"{label}: per-step cross-rank token spread <= 2% (worst {100 * cap.spread:.3f}%)",
                    cap.spread <= 0.02 and step_max.spread <= 0.02))
    worst_gap = max(a - b for a, b in zip(cap.padding, base.padding)) if base.failed == 0 else float("nan")
    results.append((f"{label}: pad_to=cap padding <= baseline + 1 pp (worst rollout {100 * worst_gap:+.2f} pp)",
                    worst_gap <= 0.01))
    worst = max(step_max.padding)
    results.append((f"{label}: pad_to=step_max padding <= 15% (worst {100 * worst:.2f}%)", worst <= 0.15))


def time_large(results: list) -> None:
    case = Case(65_536, 64, 16, 65_536)
    rng = np.random.default_rng([SEED, case.samples])
    lengths = rollout_lengths(rng, case.samples)
    times, base_times = [], []
    for _ in range(5):
        plan, ms = timed(lambda: PLANNERS["seqflow pad_to=cap"](lengths, case))
        times.append(ms)
        base, ms = timed(lambda: PLANNERS["xtuner baseline"](lengths, case))
        base_times.append(ms)
    print(f"\n{case.samples:,} samples, dp {case.dp}, {case.steps} steps, cap {case.cap:,}: "
          f"seqflow plan best {min(times):.1f} ms (median {np.median(times):.1f}), "
          f"baseline best {min(base_times):.1f} ms; seqflow padding {100 * plan.stats.padding_ratio:.2f}%, "
          f"baseline {100 * base.stats.padding_ratio:.2f}% with {base.stats.packs_over_cap} packs over the cap")
    results.append((f"65536 samples, dp 64, 16 steps: plan in under 100 ms (best {min(times):.1f} ms)",
                    min(times) < 100))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=int, default=20, help="batches per case (default 20)")
    args = parser.parse_args()
    results: list = []
    for case in (Case(2_048, 32, 8, 65_536), Case(512, 8, 4, 32_768)):
        rows = run_case(case, args.rollouts)
        print_table(case, rows, args.rollouts)
        check_targets(case, rows, results)
    print("\nWhere the baseline's defects show (no targets):")
    for case in (Case(2_048, 32, 8, 20_480), Case(2_000, 32, 8, 65_536)):
        rows = run_case(case, args.rollouts)
        print_table(case, rows, args.rollouts)
    time_large(results)
    print()
    for text, ok in results:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
