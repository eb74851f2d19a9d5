#!/usr/bin/env python3
"""Training benchmark: DP balance measured on real forward/backward compute.

    python bench/training_bench.py [--quick] [--out DIR] [--dp 4 8 16] [--dist lognormal bimodal] [--repeats 5]
                                   [--resolve PERCENT [--max-repeats 40]]

(`./run bench training` installs what it needs and runs it.) The default run
takes 17-19 minutes of compute (one core), --quick 4.

A small causal transformer (bench/training_model.py: CPU torch, one thread,
attention per sequence inside a packed micro-batch) trains on GRPO rollouts
with long-tailed response lengths (bench/training_data.py). Each row spreads
the same rollout over the DP ranks and into packed micro-batches of at most
max_length tokens (bench/training_splits.py):

  contiguous                  whole prompts in order, micro-batches filled in order
  verl KK, verl workload      seqflow.compat.verl: get_group_balanced_partitions +
                              rearrange_micro_batches (verl's exact results)
  seqflow tokens / verl workload / calibrated / online
                              seqflow.pack.plan + materialize with that workload

Every micro-batch runs forward + backward alone (one at a time, so that the
ranks do not share the cores), in --repeats rounds that each run every
micro-batch of every offline row of the case once, in a random order (so
that a spell of the machine lands on a few micro-batches of many ranks and
in one round of every row, not on the ranks timed then); each micro-batch's
time is the median of its --repeats runs (with --resolve, the balanced
rows then run alone in more rounds until their idle from noise is at most
PERCENT, see Resolution, and calibration micro-batches run --max-repeats
times) and a rank's
the sum of its micro-batches' (Trainer.measure), timed by the training
thread's CPU time (--clock cpu: what a core of its own would take, steady
while other processes load the machine) or the wall clock (--clock wall),
freed memory kept in the process for the next micro-batch as a GPU caching
allocator keeps it (--malloc keep; bench/training_malloc.py: with glibc's
defaults a long micro-batch faulted its buffers in again on most runs, 15-20%
of its time); the step takes as long as the slowest rank. An online step whose plan is
one of the rows' or an earlier step's (the tokens prior's first step is the
tokens row's) reuses that measurement. Each case first times random
micro-batches of both distributions for seqflow.balance.calibrate (timed as
the ranks are, right before its rows); the tokens and verl models predict
seconds with one scale fitted (least squares) on the same records. The
online rows start from tokens and report every step's micro-batch timings
to seqflow.balance.OnlineWorkload, the next step planned with its refitted
model (on the same rollout, so that every step is comparable with the
offline fit).

Prints the run header (with the page faults inside timed micro-batches),
per case its calibration fit and a table (step time,
idle = 1 - mean/max rank time, the rank times' noise (standard error, from
each pack's spread over the rounds) and the idle that noise alone would show
on a plan of equal ranks, predicted vs measured rank time error, tokens/s),
a check of that noise against the odd and even runs, the online rows per step, text bars of the rank times and the
PASS/FAIL lines of the targets; writes PNG charts and training_results.json
(every row's per-rank and per-pack times, every case's calibration records)
to --out. The exit code is
0 whatever the targets say: read the PASS/FAIL lines.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import gc
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

import seqflow
import seqflow.balance as sb
import training_malloc
import training_report as report
from run_header import run_header
from training_data import DISTRIBUTIONS, Rollout, make_rollout, response_lengths
from training_model import CausalLM, ModelConfig, train_micro_batch
from training_splits import Pack, contiguous, pack_lengths, pack_samples, seqflow_plan, verl_split

SEED = 20261127
GROUP_SIZE = 4  # GRPO responses per prompt
WARMUP_BATCHES = 3
MAX_SEQUENCES_PER_BATCH = 5  # the small calibration micro-batches hold 1..5 sequences
PACK_DRAWS = 64  # sequences drawn for a filled calibration pack (those that fit are kept)
CALIBRATION_BATCHES_PER_RUN = 5  # micro-batches between optimizer steps while calibrating
REFERENCE_RUNS = 5  # the speed probe's start: the median of this many runs of the reference
ONLINE_WINDOW = 4096
ONLINE_MIN_RECORDS = 16

# Targets.
IDLE_TARGET = 0.02
ERROR_TARGET = 0.05
ONLINE_STEPS_TARGET = 3
ONLINE_IDLE_TOLERANCE = 0.01  # online is "at the offline fit" within these of its idle and max error
ONLINE_ERROR_TOLERANCE = 0.02
MEDIAN_SE = 1.2533  # sqrt(pi / 2): a median's standard error over a mean's, for normal noise
MAD_SD = 1.4826  # sd / MAD, for normal noise
NOISE_DRAWS = 20000  # of Timing.noise_idle


@dataclasses.dataclass(frozen=True)
class Settings:
    max_length: int  # the longest sample, and the token cap of a micro-batch
    prompts_per_rank: int
    calibration_batches: int
    online_steps: int
    cases: tuple  # (distribution, dp) pairs
    alignment: int = 1  # calibrate's (and the online model's): > 1 prices lengths not a multiple of it apart


QUICK = Settings(max_length=512, prompts_per_rank=4, calibration_batches=40, online_steps=4,
                 cases=(("lognormal", 4),))
FULL = Settings(max_length=1024, prompts_per_rank=4, calibration_batches=100, online_steps=4,
                cases=(("lognormal", 4), ("lognormal", 8), ("bimodal", 4)))


@dataclasses.dataclass(frozen=True)
class Timing:
    """A plan's measured seconds (Trainer.measure): per rank, a (packs,
    rounds) array of every pack's seconds in every round."""

    runs: list

    @property
    def rounds(self) -> int:
        return self.runs[0].shape[1]

    def with_round(self, seconds: list) -> Timing:
        """This timing and one more round (per rank, per pack: seconds)."""
        return Timing([np.column_stack((runs, np.array(s, dtype=np.float64).reshape(len(runs))))
                       for runs, s in zip(self.runs, seconds)])

    @functools.cached_property  # Row's metrics read these many times
    def pack_seconds(self) -> list:
        """Per rank, per pack: the median over the rounds."""
        return [[float(s) for s in np.median(runs, axis=1)] for runs in self.runs]

    @functools.cached_property
    def rank_seconds(self) -> np.ndarray:
        """Per rank: the sum of its packs' medians."""
        return np.array([float(np.median(runs, axis=1).sum()) for runs in self.runs])

    @functools.cached_property
    def rank_noise(self) -> np.ndarray:
        """Per rank: the standard error of its time, relative to it, from
        its packs' spreads over the rounds (a pack's median has a standard
        error of about 1.25 sd / sqrt(rounds) for normal noise, its sd
        estimated robustly as 1.48 MAD; packs independent)."""
        errors = []
        for runs in self.runs:
            rounds = runs.shape[1]
            mad = np.median(np.abs(runs - np.median(runs, axis=1, keepdims=True)), axis=1)
            errors.append(float(np.sqrt(np.sum((MEDIAN_SE * MAD_SD * mad) ** 2 / rounds))))
        return np.array(errors) / self.rank_seconds

    @functools.cached_property
    def noise_idle(self) -> float:
        """What its rank noise alone would idle (noise_idle)."""
        return noise_idle(self.rank_noise)

    def halves_difference(self) -> tuple:
        """A check of rank_noise against the runs themselves: the sd of the
        difference between the rank shares (a rank's time over the mean
        rank's) from the odd and from the even rounds, measured, and as
        rank_noise predicts it (each half's standard error grows with the
        square root of rounds over its rounds). Needs two rounds."""
        rounds = self.rounds
        if rounds < 2:
            raise ValueError(f"halves_difference needs at least 2 rounds, got {rounds}")
        first, second = (np.array([np.median(runs[:, half::2], axis=1).sum() for runs in self.runs])
                         for half in (0, 1))
        measured = float(np.std(first / first.mean() - second / second.mean()))
        halves = np.array([(rounds + 1) // 2, rounds // 2])
        expected = float(np.sqrt(np.mean(self.rank_noise ** 2) * np.sum(rounds / halves)))
        return measured, expected


@dataclasses.dataclass(frozen=True)
class Resolution:
    """How finely the plans the targets judge are measured: after the
    common rounds, rounds of those plans alone are added until each one's
    idle from noise is at most `idle` or it has `max_rounds` rounds (the
    floor falls with the square root of the rounds; timing every row that
    long would multiply the run's time for rows no target reads)."""

    idle: float
    max_rounds: int

    def pending(self, timings: list, judged) -> list:
        """The judged plans (indices into timings) not yet resolved."""
        return [plan for plan in judged
                if timings[plan].rounds < self.max_rounds and timings[plan].noise_idle > self.idle]


def noise_idle(rank_noise: np.ndarray, draws: int = NOISE_DRAWS) -> float:
    """The mean idle of ranks that all take the same time, each measured
    with its relative standard error `rank_noise` (normal draws)."""
    rng = np.random.default_rng([SEED, 13])
    totals = 1.0 + rng.standard_normal((draws, len(rank_noise))) * rank_noise
    return float(np.mean(1.0 - totals.mean(axis=1) / totals.max(axis=1)))


@dataclasses.dataclass
class Row:
    """One way of splitting a case's rollout, measured."""

    name: str
    predictor_name: str  # the model whose seconds are the prediction
    ranks: list  # per rank, its packs
    timing: Timing
    predicted: np.ndarray  # seconds per rank

    @property
    def measured(self) -> np.ndarray:
        """Seconds per rank."""
        return self.timing.rank_seconds

    @property
    def pack_seconds(self) -> list:
        """Per rank, per pack, median seconds."""
        return self.timing.pack_seconds

    @property
    def step_seconds(self) -> float:
        return float(self.measured.max())

    @property
    def idle(self) -> float:
        measured = self.measured
        return 1.0 - float(measured.mean() / measured.max())

    @property
    def errors(self) -> np.ndarray:
        return np.abs(self.predicted - self.measured) / self.measured

    @property
    def tokens(self) -> int:
        return sum(int(p.input_ids.shape[0]) for rank in self.ranks for p in rank)


@dataclasses.dataclass
class Calibration:
    """A case's calibration: its records, the fitted model and every row's
    predictor (seconds of a micro-batch's lengths)."""

    records: list  # (lengths, seconds) per calibration micro-batch
    workload: sb.Workload
    predictors: dict  # predictor name -> seconds(lengths)
    runs: int  # a record's seconds are the median of this many


@dataclasses.dataclass
class Case:
    dist: str
    dp: int
    calibration: Calibration
    rows: list = dataclasses.field(default_factory=list)
    online: list = dataclasses.field(default_factory=list)  # a Row per online step

    @property
    def label(self) -> str:
        return f"{self.dist} dp={self.dp}"


@contextlib.contextmanager
def collector_paused():
    """No cyclic garbage collection inside a timed round (its pauses would
    land on whichever micro-batch allocates when it triggers; the autograd
    graph a micro-batch leaves is freed by reference counting)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# What a micro-batch's seconds are. torch on one thread computes forward and
# backward on the calling thread, so its CPU time is what the micro-batch
# takes on a core of its own, however many other processes share the machine.
CLOCKS = {"cpu": time.thread_time, "wall": time.perf_counter}


class Trainer:
    """Times forward + backward of packs on one model with `clock` (one of
    CLOCKS); `bar` (a tqdm progress bar) counts the tokens trained.

    With a `reference` pack, every run of micro-batches (a rank's, or a few
    calibration ones) is followed by the reference, and a round of runs is
    scaled by what the reference took at the start over what it takes now
    (see time_round): times come out at the machine's speed at the start, so a
    machine-wide change of speed (other jobs sharing caches and cores, clock frequency)
    between the calibration and a row, or between two rows, cancels."""

    def __init__(self, config: ModelConfig, bar, clock=time.thread_time, reference: Pack | None = None):
        self.model = CausalLM(config)
        self.bar = bar
        self.clock = clock
        self.reference = reference
        self.reference_seconds = None  # what the reference took at the start (median of REFERENCE_RUNS)
        self.speeds = []  # every probe's speed relative to the start
        self.order = np.random.default_rng([SEED, 11])  # of the micro-batches in a round (time_round)
        self.micro_batches = 0  # timed so far
        self.page_faults = 0  # taken while they ran (see training_malloc)

    def seconds(self, pack: Pack) -> float:
        faults = training_malloc.page_faults()
        start = self.clock()
        train_micro_batch(self.model, pack)
        elapsed = self.clock() - start
        self.page_faults += training_malloc.page_faults() - faults
        self.micro_batches += 1
        self.bar.update(int(pack.input_ids.shape[0]))
        return elapsed

    def start_speed_probe(self) -> None:
        """Times the reference on a warm model: the speed everything is scaled to."""
        if self.reference is not None:
            self.reference_seconds = statistics.median(self.seconds(self.reference) for _ in range(REFERENCE_RUNS))
            self.model.zero_grad(set_to_none=True)

    def end_of_run(self) -> float:
        """The probe's factor after the run just done (the starting speed
        over the current one; 1 without a reference), then drops the
        gradients (the optimizer step)."""
        factor = 1.0
        if self.reference_seconds is not None:
            factor = self.reference_seconds / self.seconds(self.reference)
            self.speeds.append(1.0 / factor)
        self.model.zero_grad(set_to_none=True)
        return factor

    def time_round(self, plans: list) -> list:
        """Seconds per plan, per rank, per pack of one run of every pack of
        every plan, one micro-batch at a time in a fresh random order, split
        into as many runs as the plans have ranks, each run followed by a
        probe and by dropping the gradients (an optimizer step). A spell of
        the machine then lands on a few micro-batches of many ranks, which
        the medians over rounds drop; timed a rank after another, a spell of
        a few seconds lands on one or two ranks whole and, recurring, in
        several rounds (one dp 16 plan timed 10 rounds each way: the rank
        shares of half the rounds and of the other half differed by 2.6% sd
        a rank after another, by 1.0% shuffled). Scaled by the median of the
        round's probes: one probe is as noisy as one micro-batch (1.5-4%
        here), their median is not, and it scales every rank alike."""
        slots = [(plan, rank, index) for plan, ranks in enumerate(plans) for rank, packs in enumerate(ranks)
                 for index in range(len(packs))]
        runs = np.array_split(self.order.permutation(len(slots)), sum(len(ranks) for ranks in plans))
        seconds = [[[0.0] * len(packs) for packs in ranks] for ranks in plans]
        factors = []
        with collector_paused():  # once a round: a full collection takes 0.15 s with torch loaded
            for run in runs:
                for slot in run:
                    plan, rank, index = slots[slot]
                    seconds[plan][rank][index] = self.seconds(plans[plan][rank][index])
                factors.append(self.end_of_run())
        factor = statistics.median(factors)
        return [[[s * factor for s in packs] for packs in ranks] for ranks in seconds]

    def measure(self, plans: list, repeats: int, resolution: Resolution | None = None, judged=()) -> list:
        """A Timing per plan (its ranks' packs), from `repeats` rounds, each
        running every pack of every plan once (time_round), so a spell of
        the machine lands in one round of each plan rather than in most
        rounds of whichever plan ran then. A pack's seconds are the median
        over the rounds and a rank's the sum of its packs', so a straggling
        micro-batch in one run counts in no rank's time. With a
        `resolution`, the `judged` plans (indices) then get rounds of their
        own until it is met."""
        timings = [Timing([np.empty((len(packs), 0)) for packs in ranks]) for ranks in plans]

        def add_round(indices: list) -> None:
            for plan, seconds in zip(indices, self.time_round([plans[plan] for plan in indices])):
                timings[plan] = timings[plan].with_round(seconds)

        for _ in range(repeats):
            add_round(list(range(len(plans))))
        while resolution is not None and (pending := resolution.pending(timings, judged)):
            add_round(pending)
        return timings


def reference_pack(max_length: int, vocab: int) -> Pack:
    """The speed probe's micro-batch: sequences of 1/2, 1/4, 1/8 and 1/8 of
    the cap (a mix of attention and token work), fixed ids."""
    lengths = np.array([max_length // 2, max_length // 4, max_length // 8, max_length // 8], dtype=np.int64)
    return random_pack(lengths, vocab, np.random.default_rng([SEED, 7]))


def sample_lengths(dist: str, count: int, max_length: int, rng: np.random.Generator) -> np.ndarray:
    """`count` response lengths of `dist`, each within 1..max_length."""
    return np.clip(response_lengths(dist, count, max_length, rng), 1, max_length)


def calibration_batches(settings: Settings, rng: np.random.Generator) -> list:
    """Random micro-batches of either distribution (whatever the case's:
    lognormal tails reach the cap too rarely to pin down the attention
    term; a lognormal-only calibration left lognormal dp 8 idling 2.0-2.3%
    in three runs where the mixed one had idled 0.8-1.8% in ten),
    alternately of two shapes: 1..MAX_SEQUENCES_PER_BATCH sequences (the
    last ones dropped while the batch passes the cap: small batches pin down
    the per-micro-batch and per-sequence terms) and packs filled like the
    planner's (sequences added while they fit under the cap: what the plans
    will train)."""
    batches = []
    for index in range(settings.calibration_batches):
        dist = DISTRIBUTIONS[(index // 2) % len(DISTRIBUTIONS)]
        filled = index % 2 == 1
        count = PACK_DRAWS if filled else int(rng.integers(1, MAX_SEQUENCES_PER_BATCH, endpoint=True))
        lengths = sample_lengths(dist, count, settings.max_length, rng)
        if filled:
            lengths = lengths[:max(1, int(np.searchsorted(np.cumsum(lengths), settings.max_length, side="right")))]
        while len(lengths) > 1 and lengths.sum() > settings.max_length:
            lengths = lengths[:-1]
        batches.append(lengths)
    return batches


def warm_up(trainer: Trainer, settings: Settings, vocab: int, rng: np.random.Generator) -> None:
    """A few untimed micro-batches of every distribution, then the speed
    probe's start: what every later time is scaled to."""
    for index in range(WARMUP_BATCHES):
        dist = DISTRIBUTIONS[index % len(DISTRIBUTIONS)]
        lengths = sample_lengths(dist, 1, settings.max_length, rng)
        trainer.seconds(random_pack(lengths, vocab, rng))
    trainer.model.zero_grad(set_to_none=True)
    trainer.start_speed_probe()


def calibrate(trainer: Trainer, settings: Settings, vocab: int, rng: np.random.Generator, repeats: int) -> Calibration:
    """Times calibration micro-batches as the rows are (Trainer.measure:
    runs of a few micro-batches whose gradients accumulate as on a rank,
    each micro-batch's seconds the median of `repeats` runs) and fits
    seqflow.balance.calibrate to them, and the scale of the tokens and verl
    models. Each case calibrates right before its rows, as a user
    calibrates before training: the cost of long attention relative to the
    rest moves with the machine's state by a few percent over minutes, so a
    fit from the start of the run drifts from what the last case measures."""
    batches = calibration_batches(settings, rng)
    packs = [random_pack(lengths, vocab, rng) for lengths in batches]
    runs = [packs[start:start + CALIBRATION_BATCHES_PER_RUN] for start in range(0, len(packs), CALIBRATION_BATCHES_PER_RUN)]
    [timing] = trainer.measure([runs], repeats)
    records = list(zip(batches, (s for run in timing.pack_seconds for s in run)))
    workload = sb.calibrate(records, alignment=settings.alignment)
    predictors = {
        "tokens": scaled_predictor(tokens_cost, records),
        "verl": scaled_predictor(verl_cost, records),
        "calibrated": workload.seconds,
    }
    return Calibration(records, workload, predictors, timing.rounds)


def random_pack(lengths: np.ndarray, vocab: int, rng: np.random.Generator) -> Pack:
    ids = [rng.integers(0, vocab, size=int(n), dtype=np.int64) for n in lengths]
    return pack_samples(Rollout(lengths, np.zeros(len(lengths), dtype=np.int64), ids), np.arange(len(lengths)))


def scaled_predictor(cost, records):
    """seconds(lengths) = scale * sum(cost(L)), the scale fitted by least
    squares on the calibration records."""
    costs = np.array([cost(lengths).sum() for lengths, _ in records], dtype=np.float64)
    seconds = np.array([s for _, s in records])
    scale = float(costs @ seconds / (costs @ costs))
    return lambda lengths: scale * float(cost(lengths).sum())


def tokens_cost(lengths: np.ndarray) -> np.ndarray:
    return lengths.astype(np.float64)


def verl_cost(lengths: np.ndarray) -> np.ndarray:
    lengths = lengths.astype(np.float64)
    return 24576.0 * lengths + lengths * lengths


def predicted_ranks(predictor, ranks: list) -> np.ndarray:
    """Predicted seconds per rank: the sum of its micro-batches'."""
    return np.array([sum(predictor(pack_lengths(p)) for p in packs) for packs in ranks])


def measured_rows(trainer: Trainer, plans: list, predictors: dict, repeats: int,
                  resolution: Resolution | None = None, judged=()) -> list:
    """A Row per (name, predictor name, ranks) plan, the plans timed
    together (Trainer.measure), the `judged` ones (indices) to `resolution`."""
    timings = trainer.measure([ranks for _, _, ranks in plans], repeats, resolution, judged)
    return [Row(name, predictor_name, ranks, timing, predicted_ranks(predictors[predictor_name], ranks))
            for (name, predictor_name, ranks), timing in zip(plans, timings)]


def same_packs(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) and all(np.array_equal(p.samples, q.samples) for p, q in zip(x, y)) for x, y in zip(a, b))


def online_rows(trainer: Trainer, rollout, dp: int, settings: Settings, predictors: dict, repeats: int,
                measured: list, resolution: Resolution | None = None) -> list:
    """One row per step: plan with the online model's current snapshot,
    train, report every pack's median seconds, wait for the refit. A plan
    identical to one of the `measured` rows (the tokens prior's first step)
    or of an earlier step reuses that measurement."""
    online = sb.OnlineWorkload(prior="tokens", window=ONLINE_WINDOW, min_records=ONLINE_MIN_RECORDS,
                               alignment=settings.alignment)
    rows = []
    for step in range(1, settings.online_steps + 1):
        workload = online.workload
        calibrated = workload != sb.Workload.tokens()  # the prior has no seconds: predict as the tokens row
        predictor = workload.seconds if calibrated else predictors["tokens"]
        name, predictor_name = f"seqflow online, step {step}", "online" if calibrated else "tokens (prior)"
        ranks = seqflow_plan(rollout, dp, settings.max_length, workload)
        done = next((row for row in measured + rows if same_packs(row.ranks, ranks)), None)
        if done is None:
            [row] = measured_rows(trainer, [(name, predictor_name, ranks)], {predictor_name: predictor}, repeats,
                                  resolution, judged=[0])
        else:
            row = Row(name, predictor_name, ranks, done.timing, predicted_ranks(predictor, ranks))
        for packs, seconds in zip(ranks, row.pack_seconds):
            for pack, pack_seconds in zip(packs, seconds):
                online.report(pack_lengths(pack), pack_seconds)
        online.wait_for_refit()
        rows.append(row)
    return rows


def calibration_repeats(repeats: int, resolution: Resolution | None) -> int:
    """Runs per calibration micro-batch. Resolved, the most: every row's
    prediction error is the fit's, and its 100 micro-batches cost a dp 4
    row's round."""
    return resolution.max_rounds if resolution is not None else repeats


def run_case(trainer: Trainer, dist: str, dp: int, settings: Settings, repeats: int,
             resolution: Resolution | None = None) -> Case:
    rng = np.random.default_rng([SEED, DISTRIBUTIONS.index(dist), dp])
    rollout = make_rollout(dist, settings.prompts_per_rank * dp, GROUP_SIZE, settings.max_length,
                           trainer.model.config.vocab, rng)
    calibration = calibrate(trainer, settings, trainer.model.config.vocab, rng,
                            calibration_repeats(repeats, resolution))
    predictors = calibration.predictors
    cap = settings.max_length
    case = Case(dist, dp, calibration)
    plans = [
        ("contiguous", "tokens", contiguous(rollout, dp, cap)),
        ("verl KK, verl workload", "verl", verl_split(rollout, dp, cap)),
        ("seqflow, tokens", "tokens", seqflow_plan(rollout, dp, cap, "tokens")),
        ("seqflow, verl workload", "verl", seqflow_plan(rollout, dp, cap, "verl")),
        ("seqflow, calibrated", "calibrated", seqflow_plan(rollout, dp, cap, calibration.workload)),
    ]
    # Every balanced row is judged: the targets read verl's and the calibrated,
    # and the online steps, whose first is the tokens row's plan.
    case.rows = measured_rows(trainer, plans, predictors, repeats, resolution, judged=range(1, len(plans)))
    case.online = online_rows(trainer, rollout, dp, settings, predictors, repeats, case.rows, resolution)
    return case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one small case (a few minutes)")
    parser.add_argument("--out", type=Path, default=Path("build/bench-charts"), help="where the PNG charts and training_results.json go")
    parser.add_argument("--dp", type=int, nargs="+",
                        help="DP sizes: every --dist at every --dp (default cases: lognormal dp 4 and 8, "
                             "bimodal dp 4; --quick: lognormal dp 4)")
    parser.add_argument("--dist", nargs="+", choices=DISTRIBUTIONS, help="length distributions (see --dp)")
    parser.add_argument("--repeats", type=int, default=5, help="runs per rank; its time is their median")
    parser.add_argument("--resolve", type=float, metavar="PERCENT",
                        help="then time the balanced rows (all but contiguous; the targets judge them) in more "
                             "runs until each one's idle from noise is at most PERCENT, and the calibration in "
                             "--max-repeats runs (default: no more runs)")
    parser.add_argument("--max-repeats", type=int, default=40, help="with --resolve: at most this many runs per row")
    parser.add_argument("--alignment", type=int, default=1, metavar="N",
                        help="fit the calibrated and online models with calibrate(alignment=N): extra attention "
                             "seconds for sequences whose length is not a multiple of N (8: torch's CPU attention "
                             "with AVX2; default 1: the four terms)")
    parser.add_argument("--no-speed-probe", dest="speed_probe", action="store_false",
                        help="do not scale runs by a reference micro-batch timed after each (see Trainer)")
    parser.add_argument("--malloc", choices=training_malloc.MODES, default="keep",
                        help="keep: freed memory stays in the process for the next micro-batch (default; as a GPU "
                             "caching allocator), system: glibc's defaults (see bench/training_malloc.py)")
    parser.add_argument("--clock", choices=CLOCKS, default="cpu",
                        help="cpu: the training thread's CPU time (default; steady on a shared machine), "
                             "wall: elapsed time")
    args = parser.parse_args()
    if args.repeats < 1 or args.alignment < 1 or any(dp < 1 for dp in args.dp or ()):
        parser.error(f"--repeats, --alignment and --dp must be >= 1, got {args.repeats}, {args.alignment} and {args.dp}")
    resolution = None
    if args.resolve is not None:
        if not 0 < args.resolve < 100:
            parser.error(f"--resolve must be a percentage between 0 and 100, got {args.resolve}")
        if args.max_repeats < args.repeats:
            parser.error(f"--max-repeats must be >= --repeats ({args.repeats}), got {args.max_repeats}")
        resolution = Resolution(args.resolve / 100, args.max_repeats)
    settings = QUICK if args.quick else FULL
    if args.dp or args.dist:  # every distribution at every dp
        dists = args.dist or sorted({dist for dist, _ in settings.cases})
        dps = args.dp or sorted({dp for _, dp in settings.cases})
        settings = dataclasses.replace(settings, cases=tuple((dist, dp) for dist in dists for dp in dps))
    settings = dataclasses.replace(settings, alignment=args.alignment)

    malloc = training_malloc.set_mode(args.malloc)
    torch.set_num_threads(1)
    config = ModelConfig(max_length=settings.max_length)
    mean_tokens = settings.prompts_per_rank * GROUP_SIZE * settings.max_length * 0.4  # per rank, roughly
    plans_per_case = 5 + settings.online_steps - 1  # online's first step is the tokens row's plan
    judged_per_case = 3 + settings.online_steps  # every row but contiguous; online after the prior
    most_runs = judged_per_case * (resolution.max_rounds - args.repeats) if resolution else 0
    rank_runs = sum(dp for _, dp in settings.cases) * (plans_per_case * args.repeats + most_runs)
    probe_tokens = settings.max_length if args.speed_probe else 0  # one reference after each run
    calibration_runs_per_case = calibration_repeats(args.repeats, resolution)
    calibration_runs = -(-settings.calibration_batches // CALIBRATION_BATCHES_PER_RUN) * calibration_runs_per_case
    calibration_tokens = (settings.calibration_batches * settings.max_length * 0.6 * calibration_runs_per_case
                          + calibration_runs * probe_tokens)
    total = int(len(settings.cases) * calibration_tokens + rank_runs * (mean_tokens + probe_tokens))
    from tqdm import tqdm  # only the command needs it (./run bench installs it)

    reference = reference_pack(settings.max_length, config.vocab) if args.speed_probe else None
    trainer = Trainer(config, tqdm(total=total, unit="tok", unit_scale=True, file=sys.stderr,
                                   desc="training bench", dynamic_ncols=True), CLOCKS[args.clock], reference)
    warm_up(trainer, settings, config.vocab, np.random.default_rng([SEED, 99]))
    results = [run_case(trainer, dist, dp, settings, args.repeats, resolution) for dist, dp in settings.cases]
    trainer.bar.total = trainer.bar.n  # the total was an estimate; identical plans were not run twice
    trainer.bar.close()

    lines = run_header(seqflow)
    lines += report.describe(config, settings, GROUP_SIZE, args.repeats, resolution, args.clock, torch.__version__)
    lines += report.speed_lines(trainer.reference_seconds, trainer.speeds)
    lines += report.memory_lines(malloc, trainer.micro_batches, trainer.page_faults)
    for case in results:
        lines += report.case_lines(case, args.repeats)
    lines += report.target_lines(results, IDLE_TARGET, ERROR_TARGET, ONLINE_STEPS_TARGET, ONLINE_IDLE_TOLERANCE,
                                 ONLINE_ERROR_TOLERANCE)
    print("\n".join(lines), flush=True)
    for path in report.write_charts(results, args.out):
        print(f"chart: {path}")
    print(f"results: {report.write_results(results, args.out / 'training_results.json')}")


if __name__ == "__main__":
    main()
