"""Does calibrate's alignment term predict packs it was not fitted on better?

Times the training benchmark's calibration micro-batches together with every
pack of three plans of one rollout (seqflow on tokens, seqflow on verl's
workload, verl's KK), as the training benchmark times its rows
(Trainer.measure: shuffled rounds, the speed probe, freed memory kept), fits
calibrate with the four terms and with `--alignment` on the calibration
records alone, and prints each fit's errors on the plans' packs, which
neither fit saw.

    ./run bench holdout --dp 8 --dist bimodal --repeats 9 --alignment 8
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

import seqflow
import seqflow.balance as sb
import training_bench as tb
import training_malloc
from balance_bench import table
from run_header import run_header
from training_data import DISTRIBUTIONS, make_rollout
from training_model import ModelConfig
from training_report import percent, seconds
from training_splits import pack_lengths, seqflow_plan, verl_split

LONG_FRACTION = 0.7  # a pack is long when its longest sequence has at least this fraction of the cap


class Silent:
    """Trainer's progress bar, unused here."""

    def update(self, _tokens: int) -> None:
        pass


def held_out_plans(rollout, dp: int, cap: int) -> dict:
    return {
        "seqflow, tokens": seqflow_plan(rollout, dp, cap, "tokens"),
        "seqflow, verl workload": seqflow_plan(rollout, dp, cap, "verl"),
        "verl KK, verl workload": verl_split(rollout, dp, cap),
    }


def error_cells(workload, ranks: list, seconds: list, alignment: int, long_length: int) -> list[str]:
    """Median and p90 pack error, the mean signed error of long packs whose
    longest sequence is aligned and of those whose is not, the largest rank
    error."""
    lengths = [pack_lengths(p) for packs in ranks for p in packs]
    measured = np.array([s for rank in seconds for s in rank])
    errors = np.array([workload.seconds(l) for l in lengths]) / measured - 1
    longest = np.array([int(l.max()) for l in lengths])
    long_aligned = (longest >= long_length) & (longest % alignment == 0)
    long_unaligned = (longest >= long_length) & (longest % alignment != 0)
    rank_predicted = np.array([sum(workload.seconds(pack_lengths(p)) for p in packs) for packs in ranks])
    rank_errors = np.abs(rank_predicted / np.array([sum(rank) for rank in seconds]) - 1)

    def mean_bias(mask) -> str:
        return f"{100 * errors[mask].mean():+.1f}% ({mask.sum()})" if mask.any() else "-"

    return [percent(float(np.median(np.abs(errors)))), percent(float(np.quantile(np.abs(errors), 0.9))),
            mean_bias(long_aligned), mean_bias(long_unaligned), percent(float(rank_errors.max()))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dp", type=int, default=8, help="DP ranks of the rollout's plans")
    parser.add_argument("--dist", choices=DISTRIBUTIONS, default="bimodal", help="response length distribution")
    parser.add_argument("--repeats", type=int, default=9, help="runs per micro-batch; its time is their median")
    parser.add_argument("--alignment", type=int, default=8, help="the alignment fitted beside the four terms")
    args = parser.parse_args()
    if args.dp < 1 or args.repeats < 1 or args.alignment < 2:
        parser.error(f"--dp and --repeats must be >= 1 and --alignment >= 2, got {args.dp}, {args.repeats} and "
                     f"{args.alignment}")
    training_malloc.set_mode("keep")
    torch.set_num_threads(1)
    settings = tb.FULL
    cap = settings.max_length
    config = ModelConfig(max_length=cap)
    trainer = tb.Trainer(config, Silent(), time.thread_time, tb.reference_pack(cap, config.vocab))
    tb.warm_up(trainer, settings, config.vocab, np.random.default_rng([tb.SEED, 99]))
    rng = np.random.default_rng([tb.SEED, DISTRIBUTIONS.index(args.dist), args.dp])
    rollout = make_rollout(args.dist, settings.prompts_per_rank * args.dp, tb.GROUP_SIZE, cap, config.vocab, rng)
    batches = tb.calibration_batches(settings, rng)
    packs = [tb.random_pack(lengths, config.vocab, rng) for lengths in batches]
    runs = [packs[start:start + tb.CALIBRATION_BATCHES_PER_RUN]
            for start in range(0, len(packs), tb.CALIBRATION_BATCHES_PER_RUN)]
    plans = held_out_plans(rollout, args.dp, cap)
    print(f"timing {len(packs)} calibration micro-batches and {len(plans)} plans, {args.repeats} runs each ...",
          file=sys.stderr, flush=True)
    calibration, *timings = trainer.measure([runs, *plans.values()], args.repeats)
    records = list(zip(batches, (s for run in calibration.pack_seconds for s in run)))
    fits = {"four terms": sb.calibrate(records), f"alignment {args.alignment}":
            sb.calibrate(records, alignment=args.alignment)}
    long_length = int(LONG_FRACTION * cap)
    rows = [[plan, fit, *error_cells(workload, ranks, timing.pack_seconds, args.alignment, long_length)]
            for (plan, ranks), timing in zip(plans.items(), timings) for fit, workload in fits.items()]
    lines = run_header(seqflow) + [
        f"{args.dist} dp {args.dp}: {len(rollout.lengths)} samples; each micro-batch the median of {args.repeats} "
        f"runs; the reference micro-batch took {seconds(trainer.reference_seconds)} at the start",
        *(f"{name}: {workload.name}, fit median error {percent(workload.fit.median_error)}"
          for name, workload in fits.items()),
        "",
        table(["plan (packs nobody fitted on)", "fit", "median pack error", "p90 pack error",
               f"long packs' bias, longest a multiple of {args.alignment} (packs)", "... not a multiple (packs)",
               "max rank error"], rows, "llrrrrr"),
        f"(long: the longest sequence has >= {long_length} tokens)",
    ]
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
