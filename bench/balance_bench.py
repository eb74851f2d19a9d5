#!/usr/bin/env python3
"""Balancing benchmark: seqflow.balance against verl / TransferQueue's
Karmarkar-Karp (the reference, loaded by tools/reference_peer.py).

    python bench/balance_bench.py [--quick] [--max-reference-seconds 60]

Prints, as markdown-friendly plain text:
  1. a table over length distributions x n x k: time, spread, gap to the lower
     bound and heaviest part against the reference's, for seqflow's `auto`,
     `kk` and `lpt` (partition(..., cardinality="free")) and the reference
     (get_seqlen_balanced_partitions(..., equal_size=False));
  2. the drop-in compatibility speed: seqflow.balance.karmarkar_karp against
     the reference karmarkar_karp on a Python list, outputs compared;
  3. the peak memory of partition(n=1,000,000, k=1,024) in a fresh process;
  4. PASS/FAIL lines for the targets, all measured in this one run.

Lengths come from numpy's default_rng with fixed seeds, so every run sees the
same inputs; times are the best of several repetitions (fewer for slow runs).
Reference runs whose estimated time exceeds --max-reference-seconds are
skipped; the estimate is a cost model scaled by the latest measured runs
(cheapest first). `--quick` runs a reduced matrix (CI smoke test, under a
minute). The exit code is 0 whatever the targets say: timings on shared
machines are noisy; read the PASS/FAIL lines.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from run_header import run_header

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "tools") not in sys.path:
    sys.path.insert(0, str(REPO / "tools"))

import seqflow  # noqa: E402
import seqflow.balance as sb  # noqa: E402

SEED = 20251122
GROUP_SIZE = 8  # GRPO responses per prompt
DISTRIBUTIONS = ("lognormal", "uniform", "bimodal", "grpo")
DIST_IDS = {name: i for i, name in enumerate(DISTRIBUTIONS)}
FULL_NS = (1_000, 8_192, 32_768, 100_000, 1_000_000)
FULL_KS = (8, 64, 512, 1_024)
QUICK_NS = (1_000, 8_192)
QUICK_KS = (8, 64)
ALGORITHMS = ("auto", "kk", "lpt")
REFERENCE = "reference"

# Cost model of the reference's free-start KK, fitted on this machine (GC on):
# about n * (1.9 us * k + 26 us * (n / 8192)^0.25) seconds: every merge sorts
# up to k sets, and heap depth and item copies grow slowly with n. Estimates
# scale it by the measured/model ratio of the latest runs, which absorbs the
# machine's speed and load.
REF_SECONDS_PER_NK = 1.9e-6
REF_SECONDS_PER_N = 26e-6

# Targets.
COMPAT_TARGETS = {False: 100.0, True: 30.0}
GAP_TARGET = 1e-3          # auto gap for lognormal lengths when n/k >= 10
BIG_N, BIG_K = 1_000_000, 1_024
BIG_TIME_TARGET = 0.5      # seconds for auto at BIG_N, BIG_K
PEAK_MB_TARGET = 300.0     # process peak RSS of that run


# --------------------------------------------------------------------------
# Inputs


def make_lengths(dist: str, n: int) -> np.ndarray:
    """Sequence lengths (int64, >= 1), reproducible for (dist, n)."""
    rng = np.random.default_rng([SEED, DIST_IDS[dist], n])
    if dist in ("lognormal", "grpo"):
        values = rng.lognormal(mean=7.0, sigma=1.0, size=n)
    elif dist == "uniform":
        values = rng.integers(1, 8192, size=n, endpoint=True).astype(np.float64)
    elif dist == "bimodal":
        long = rng.random(n) < 0.3
        values = np.where(long, rng.normal(8000.0, 800.0, n), rng.normal(200.0, 50.0, n))
    else:
        raise ValueError(dist)
    return np.maximum(np.rint(values), 1).astype(np.int64)


def make_groups(dist: str, n: int):
    """Group ids (prompt of each response) for the grouped distribution."""
    if dist != "grpo":
        return None
    return np.repeat(np.arange(n // GROUP_SIZE, dtype=np.int64), GROUP_SIZE)


def unit_count(dist: str, n: int) -> int:
    return n // GROUP_SIZE if dist == "grpo" else n


# --------------------------------------------------------------------------
# Measuring


def best_time(fn, *, budget: float, max_reps: int, min_reps: int = 1):
    """(best seconds, repetitions, last result): repeats fn while the total stays
    within `budget` seconds, between min_reps and max_reps times."""
    times = []
    result = None
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= max_reps:
            break
        if len(times) >= min_reps and (time.perf_counter() - start) + min(times) > budget:
            break
    return min(times), len(times), result


def reference_model(n: int, k: int) -> float:
    return n * (REF_SECONDS_PER_NK * k + REF_SECONDS_PER_N * (n / 8192) ** 0.25)


class ReferenceClock:
    """Measured reference times; estimates an unmeasured case as the cost model
    times the median measured/model ratio of the latest (up to 5) runs that
    took at least 50 ms. Reference runs go from cheap to expensive, so every
    estimate rests on measured neighbours."""

    def __init__(self):
        self.ratios: list[float] = []
        self.small: list[float] = []

    def add(self, n: int, k: int, seconds: float):
        (self.ratios if seconds >= 0.05 else self.small).append(seconds / reference_model(n, k))

    def estimate(self, n: int, k: int):
        recent = (self.ratios or self.small)[-5:]
        if not recent:
            return None
        return float(np.median(recent)) * reference_model(n, k)


@dataclass
class Outcome:
    seconds: float | None = None       # best time
    reps: int = 0
    heaviest: int | None = None
    spread: float | None = None
    gap: float | None = None
    note: str = ""                     # e.g. "skipped (est. 95 s)"


@dataclass
class Case:
    dist: str
    n: int
    k: int
    lower_bound: int = 0
    results: dict = field(default_factory=dict)   # algorithm -> Outcome

    @property
    def units(self) -> int:
        return unit_count(self.dist, self.n)


def plan_quality(sums: np.ndarray, lower_bound: int, total: int, k: int):
    heaviest = int(sums.max())
    mean = total / k
    spread = float(sums.max() - sums.min()) / mean if mean > 0 else 0.0
    gap = heaviest / lower_bound - 1.0 if lower_bound > 0 else 0.0
    return heaviest, spread, gap


def run_seqflow(case: Case, lengths: np.ndarray, groups, algorithm: str) -> Outcome:
    def call():
        return sb.partition(lengths, case.k, cardinality="free", groups=groups, algorithm=algorithm)

    # auto gets more repetitions: its times carry targets.
    if algorithm != "auto":
        min_reps = 1
    elif (case.n, case.k) == (BIG_N, BIG_K):
        min_reps = 7
    else:
        min_reps = 3
    seconds, reps, plan = best_time(call, budget=0.5, max_reps=max(10, min_reps), min_reps=min_reps)
    case.lower_bound = int(plan.lower_bound)
    return Outcome(seconds, reps, int(plan.heaviest), float(plan.spread), float(plan.gap))


def run_reference(case: Case, lengths: np.ndarray, groups, reference: dict) -> Outcome:
    """The reference balances units: items, or (grouped) per-group total
    lengths, whose parts are then mapped back to items."""
    if groups is None:
        unit_weights = lengths
    else:
        unit_weights = np.bincount(groups, weights=lengths).round().astype(np.int64)
    as_list = unit_weights.tolist()
    fn = reference["get_seqlen_balanced_partitions"]

    def call():
        return fn(as_list, case.k, equal_size=False)

    try:
        seconds, reps, parts = best_time(call, budget=1.0, max_reps=3)
    except AssertionError as error:
        return Outcome(note=f"failed: AssertionError {str(error)[:40]}")
    part_of_unit = np.empty(len(as_list), dtype=np.int64)
    for p, members in enumerate(parts):
        part_of_unit[members] = p
    part_of_item = part_of_unit if groups is None else part_of_unit[groups]
    sums = np.bincount(part_of_item, weights=lengths, minlength=case.k).round().astype(np.int64)
    total = int(lengths.sum())
    lower_bound = max(-(-total // case.k), int(unit_weights.max()))
    if case.lower_bound and lower_bound != case.lower_bound:
        raise AssertionError(f"lower bound mismatch for {case}: {lower_bound} != {case.lower_bound}")
    heaviest, spread, gap = plan_quality(sums, lower_bound, total, case.k)
    return Outcome(seconds, reps, heaviest, spread, gap)


# --------------------------------------------------------------------------
# Formatting


def fmt_time(seconds) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def fmt_fraction(value) -> str:
    if value is None:
        return "-"
    return "0" if value == 0 else f"{value:.2e}"


def fmt_ratio(value: float) -> str:
    return f"{value:,.0f}x" if value >= 10 else f"{value:.2f}x"


def table(headers, rows, align) -> str:
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows)]

    def line(cells):
        out = []
        for cell, width, a in zip(cells, widths, align):
            out.append(str(cell).rjust(width) if a == "r" else str(cell).ljust(width))
        return "| " + " | ".join(out) + " |"

    rule = "|" + "|".join(
        ("-" * (w + 1) + ":") if a == "r" else ("-" * (w + 2)) for w, a in zip(widths, align)
    ) + "|"
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def progress(message: str):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def emit(text: str = ""):
    print(text, flush=True)


# --------------------------------------------------------------------------
# Sections


def run_matrix(ns, ks, reference, cap: float, clock: ReferenceClock) -> list[Case]:
    cases = [Case(d, n, k) for d in DISTRIBUTIONS for n in ns for k in ks if unit_count(d, n) >= k]
    inputs = {}
    for case in cases:
        key = (case.dist, case.n)
        if key not in inputs:
            inputs[key] = (make_lengths(case.dist, case.n), make_groups(case.dist, case.n))
    for case in cases:
        lengths, groups = inputs[(case.dist, case.n)]
        for algorithm in ALGORITHMS:
            case.results[algorithm] = run_seqflow(case, lengths, groups, algorithm)
        progress(f"seqflow {case.dist} n={case.n} k={case.k}: "
                 + ", ".join(f"{a} {fmt_time(case.results[a].seconds)}" for a in ALGORITHMS))
    if reference is None:
        return cases
    # The reference goes from cheap to expensive so that every estimate
    # extrapolates from a measured neighbour.
    for case in sorted(cases, key=lambda c: (c.units * c.k, c.units, DIST_IDS[c.dist])):
        estimate = clock.estimate(case.units, case.k)
        if estimate is not None and estimate > cap:
            case.results[REFERENCE] = Outcome(note=f"skipped (est. {estimate:.0f} s)")
            progress(f"reference {case.dist} n={case.n} k={case.k}: skipped (est. {estimate:.0f} s)")
            continue
        lengths, groups = inputs[(case.dist, case.n)]
        outcome = run_reference(case, lengths, groups, reference)
        case.results[REFERENCE] = outcome
        if outcome.seconds is not None:
            clock.add(case.units, case.k, outcome.seconds)
        progress(f"reference {case.dist} n={case.n} k={case.k}: "
                 f"{fmt_time(outcome.seconds)} {outcome.note}".rstrip()
                 + (f" (est. {estimate:.1f} s)" if estimate is not None else ""))
    return cases


def matrix_rows(cases: list[Case]):
    rows = []
    for case in cases:
        ref = case.results.get(REFERENCE)
        ref_ran = ref is not None and ref.heaviest is not None
        for i, algorithm in enumerate((*ALGORITHMS, REFERENCE)):
            outcome = case.results.get(algorithm)
            if outcome is None:
                continue
            first = i == 0
            label = "reference KK" if algorithm == REFERENCE else f"seqflow {algorithm}"
            if outcome.seconds is None:
                rows.append([case.dist if first else "", f"{case.n:,}" if first else "",
                             f"{case.k:,}" if first else "", label, outcome.note,
                             "-", "-", "-", "-"])
                continue
            if algorithm == REFERENCE:
                vs_ref, speedup = "(ref)", "1x"
            elif ref_ran:
                relative = outcome.heaviest / ref.heaviest - 1.0
                vs_ref = "= ref" if relative == 0 else f"{relative:+.2e}"
                speedup = fmt_ratio(ref.seconds / outcome.seconds)
            else:
                vs_ref, speedup = "n/a", "n/a"
            rows.append([case.dist if first else "", f"{case.n:,}" if first else "",
                         f"{case.k:,}" if first else "", label, fmt_time(outcome.seconds),
                         fmt_fraction(outcome.spread), fmt_fraction(outcome.gap), vs_ref, speedup])
    headers = ["distribution", "n", "k", "algorithm", "time", "spread", "gap to LB",
               "heaviest vs ref", "speedup"]
    return table(headers, rows, "llrlrrrrr")


@dataclass
class CompatResult:
    n: int
    k: int
    equal_size: bool
    seqflow_seconds: float | None = None
    seqflow_reps: int = 0
    reference_seconds: float | None = None
    reference_reps: int = 0
    identical: bool | None = None
    note: str = ""

    @property
    def speedup(self):
        if self.seqflow_seconds and self.reference_seconds:
            return self.reference_seconds / self.seqflow_seconds
        return None


def run_compat(reference, cap: float, quick: bool, clock: ReferenceClock,
               results: list[CompatResult] | None = None) -> list[CompatResult]:
    """First call (results=None): every shape, except that the slow
    equal_size=False reference at the large shape is deferred when its
    estimate, resting on one small run only, is over the cap. Second call
    (with those results): runs the deferred one if the estimate, now resting on
    the matrix's runs too, is within the cap."""
    shapes = [(8_192, 64), (32_768, 512)]
    second_pass = results is not None
    if not second_pass:
        results = [CompatResult(n, k, e) for n, k in shapes for e in (False, True)]
    for result in results:
        n, k, equal_size = result.n, result.k, result.equal_size
        big = (n, k) != shapes[0]
        slow = big and not equal_size
        if second_pass and not (slow and result.note.startswith("deferred")):
            continue
        values = make_lengths("lognormal", n).tolist()  # a Python list, as users call it
        if not second_pass:
            seconds, reps, ours = best_time(
                lambda: sb.karmarkar_karp(values, k, equal_size), budget=1.0, max_reps=50, min_reps=5)
            result.seqflow_seconds, result.seqflow_reps = seconds, reps
        else:
            ours = sb.karmarkar_karp(values, k, equal_size)
        if reference is None:
            result.note = "reference unavailable"
            continue
        if big and quick:
            result.note = "skipped (--quick)"
            continue
        if slow:
            estimate = clock.estimate(n, k)
            if estimate is not None and estimate > cap:
                result.note = (f"skipped (est. {estimate:.0f} s)" if second_pass
                               else f"deferred (est. {estimate:.0f} s)")
                progress(f"compat reference n={n} k={k} equal_size={equal_size}: {result.note}")
                continue
            result.note = "run after the matrix" if second_pass else ""
        reps_wanted = 1 if slow else (2 if quick else 3)
        seconds, reps, theirs = best_time(
            lambda: reference["karmarkar_karp"](values, k, equal_size),
            budget=2.0, max_reps=max(reps_wanted, 10 if equal_size else 1), min_reps=reps_wanted)
        result.reference_seconds, result.reference_reps = seconds, reps
        if not equal_size:
            clock.add(n, k, seconds)
        result.identical = ours == theirs
        progress(f"compat n={n} k={k} equal_size={equal_size}: seqflow {fmt_time(result.seqflow_seconds)}"
                 f", reference {fmt_time(seconds)}, identical={result.identical}")
    return results


def compat_rows(results: list[CompatResult]) -> str:
    rows = []
    for r in results:
        target = COMPAT_TARGETS[r.equal_size] if r.n == 8_192 else None
        rows.append([
            f"{r.n:,}", f"{r.k:,}", str(r.equal_size),
            f"{fmt_time(r.seqflow_seconds)} (best of {r.seqflow_reps})",
            r.note if r.reference_seconds is None
            else f"{fmt_time(r.reference_seconds)} (best of {r.reference_reps})"
            + (f", {r.note}" if r.note else ""),
            "-" if r.speedup is None else fmt_ratio(r.speedup),
            "-" if target is None else f">= {target:.0f}x",
            "-" if r.identical is None else ("yes" if r.identical else "NO"),
        ])
    headers = ["n", "k", "equal_size", "seqflow.karmarkar_karp", "reference karmarkar_karp",
               "speedup", "target", "identical output"]
    return table(headers, rows, "rrlrrrrl")


MEMORY_PROBE = r"""
import importlib.util, os, resource, sys, time
sys.path.insert(0, os.path.dirname(sys.argv[1]))  # the bench's sibling modules
spec = importlib.util.spec_from_file_location("balance_bench", sys.argv[1])
bench = importlib.util.module_from_spec(spec)
sys.modules["balance_bench"] = bench
spec.loader.exec_module(bench)  # imports numpy and seqflow; runs nothing
dist, n, k = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
lengths = bench.make_lengths(dist, n)
groups = bench.make_groups(dist, n)
def call():
    return bench.sb.partition(lengths, k, cardinality="free", groups=groups, algorithm="auto")
def hwm_kib():
    with open("/proc/self/status") as status:
        return next((int(l.split()[1]) for l in status if l.startswith("VmHWM:")), -1)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
plan = call()
cold = time.perf_counter() - t0
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
hwm = hwm_kib()
del plan
warm, _, _ = bench.best_time(call, budget=1.0, max_reps=5, min_reps=3)
print(before, after, hwm, cold, warm)
"""


def run_memory(dists) -> dict:
    """Peak memory of one auto partition at (BIG_N, BIG_K), per distribution,
    each in a fresh interpreter: ru_maxrss (KiB on Linux) before and after the
    call, VmHWM as a cross-check, then the time of that cold call and the best
    of a few warm ones.

    Linux carries the peak RSS of the process image a child was forked from
    into its ru_maxrss at exec, so a child forked straight from this (large)
    process would start from our peak. The probe therefore runs as a child of
    a small /bin/sh, which must fork for it because a command follows.
    """
    out = {}
    for dist in dists:
        command = ["/bin/sh", "-c", '"$@"; exit $?', "sh", sys.executable, "-c", MEMORY_PROBE,
                   str(Path(__file__).resolve()), dist, str(BIG_N), str(BIG_K)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            out[dist] = done.stderr.strip()[-300:] or f"exit code {done.returncode}"
            continue
        before, after, hwm, cold, warm = done.stdout.split()
        unit = 1024.0 * (1024.0 if sys.platform == "darwin" else 1.0)  # ru_maxrss: KiB on Linux, bytes on macOS
        out[dist] = (int(before) / unit, int(after) / unit, int(hwm) / 1024.0, float(cold), float(warm))
        progress(f"memory {dist}: peak {out[dist][1]:.0f} MB")
    return out


# --------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="reduced matrix (n in 1,000 and 8,192; k in 8 and 64) for a smoke test")
    parser.add_argument("--max-reference-seconds", type=float, default=60.0, metavar="S",
                        help="skip reference runs estimated to take longer (default 60)")
    args = parser.parse_args(argv)
    started = time.perf_counter()

    for line in run_header(seqflow):
        emit(line)

    reference = None
    try:
        import reference_peer
        reference = reference_peer.load()
        emit(f"reference: {reference['version']} (karmarkar_karp, get_seqlen_balanced_partitions "
             "as copied from verl), via tools/reference_peer.py")
    except Exception as error:  # noqa: BLE001 - any failure means: continue without it
        emit()
        emit("!!! REFERENCE UNAVAILABLE: " + f"{type(error).__name__}: {error}".strip()[:500])
        emit("!!! The reference columns, the compatibility speedups and the comparison targets are skipped.")
    emit(f"mode: {'quick' if args.quick else 'full'}; reference runs estimated over "
         f"{args.max_reference_seconds:g} s are skipped")
    emit()
    emit("Legend:")
    emit("- lognormal: lengths lognormal(mean log 7, sigma 1), rounded, >= 1 (long-tailed).")
    emit("  uniform: integers 1..8192. bimodal: 70% normal(200, 50), 30% normal(8000, 800), >= 1.")
    emit(f"  grpo: n/{GROUP_SIZE} prompts x {GROUP_SIZE} responses, lognormal lengths; seqflow gets groups=..., "
         "the reference the per-group totals (cases with fewer groups than k are left out).")
    emit('- seqflow X: seqflow.balance.partition(numpy int64 array, k, cardinality="free", algorithm=X).')
    emit("  reference KK: get_seqlen_balanced_partitions(list, k, equal_size=False) (verl's KK, Python).")
    emit("- time: best of up to 10 (seqflow) / 3 (reference) repetitions, fewer when one run is slow (but")
    emit(f"  at least 3 for seqflow auto, 7 at n={BIG_N:,} k={BIG_K:,});")
    emit("  includes converting inputs and outputs (wall clock, time.perf_counter); Python's garbage")
    emit("  collector stays on, as in user code (it costs the reference about half its time).")
    emit("- spread: (heaviest - lightest part) / mean part. gap to LB: heaviest / lower bound - 1, where")
    emit("  lower bound = max(ceil(total / k), largest item or group); 0 means provably optimal.")
    emit("- heaviest vs ref: heaviest part / reference's heaviest part - 1 (negative: lighter, better).")
    emit("- skipped (est. N s): the reference's estimated time is over --max-reference-seconds. Estimate:")
    emit("  n * (1.9 us * k + 26 us * (n/8192)^0.25) (n: items, or groups for grpo), scaled by the")
    emit("  measured/estimated ratio of the latest reference runs (cheapest run first). The reference")
    emit("  also needs about 180 bytes * n * k of memory (2.9 GB at n=32,768, k=512).")
    emit("- speedup: reference time / this time. The machine is shared: compare ratios, not absolute times.")
    emit()

    ns, ks = (QUICK_NS, QUICK_KS) if args.quick else (FULL_NS, FULL_KS)
    clock = ReferenceClock()
    # The compatibility runs go first, in a fresh process as users would see them
    # (after the matrix's multi-GB reference runs the reference runs slower);
    # only a deferred slow one runs after the matrix, on better estimates.
    compat = run_compat(reference, args.max_reference_seconds, args.quick, clock)
    cases = run_matrix(ns, ks, reference, args.max_reference_seconds, clock)
    compat = run_compat(reference, args.max_reference_seconds, args.quick, clock, compat)
    # The quick run probes the plain case only (each probe imports seqflow afresh).
    memory = run_memory(("lognormal",) if args.quick else DISTRIBUTIONS)

    emit("## Balance quality and speed")
    emit()
    emit(matrix_rows(cases))
    emit()
    emit("## Drop-in compatibility: seqflow.balance.karmarkar_karp vs reference karmarkar_karp")
    emit()
    emit("Input: lognormal lengths as a Python list (as verl / TransferQueue users call it).")
    emit()
    emit(compat_rows(compat))
    emit()
    emit(f"## Peak memory: auto, n={BIG_N:,}, k={BIG_K:,}, fresh process per distribution")
    emit()
    memory_rows = []
    for dist, value in memory.items():
        if isinstance(value, str):
            memory_rows.append([dist, "failed: " + value.replace("\n", " ")[-120:], "-", "-", "-", "-", "-"])
        else:
            before, after, hwm, cold, warm = value
            memory_rows.append([dist, f"{before:.0f} MB", f"{after:.0f} MB", f"{after - before:+.0f} MB",
                                f"{hwm:.0f} MB", fmt_time(cold), fmt_time(warm)])
    emit(table(["distribution", "ru_maxrss before", "ru_maxrss after = process peak", "delta",
                "VmHWM", "time, first call", "best warm call"], memory_rows, "lrrrrrr"))
    emit()
    emit("ru_maxrss before: after importing numpy and seqflow and building the lengths (and groups).")
    emit()

    # ---- targets
    # (True: PASS, False: FAIL, None: SKIP (not measurable in this run), "INFO", text)
    checks: list[tuple] = []
    by_shape = {(r.n, r.k, r.equal_size): r for r in compat}
    for equal_size, target in COMPAT_TARGETS.items():
        r = by_shape[(8_192, 64, equal_size)]
        if r.speedup is None:
            checks.append((None, f"compat speedup n=8,192 k=64 equal_size={equal_size} >= {target:.0f}x: "
                                 f"not measured ({r.note})"))
        else:
            checks.append((r.speedup >= target,
                           f"compat speedup n=8,192 k=64 equal_size={equal_size} >= {target:.0f}x: "
                           f"{r.speedup:,.1f}x ({fmt_time(r.reference_seconds)} / {fmt_time(r.seqflow_seconds)})"))
    compared = [r for r in compat if r.identical is not None]
    if compared:
        bad = [f"n={r.n} k={r.k} equal_size={r.equal_size}" for r in compared if not r.identical]
        checks.append((not bad, f"compat outputs identical to the reference on {len(compared) - len(bad)}"
                                f"/{len(compared)} runs" + (f"; differ: {', '.join(bad)}" if bad else "")))
    else:
        checks.append((None, "compat outputs identical: not compared (no reference run)"))

    ran = [c for c in cases if c.results.get(REFERENCE) and c.results[REFERENCE].heaviest is not None]
    if ran:
        worse = [c for c in ran if c.results["auto"].heaviest > c.results[REFERENCE].heaviest]
        lighter = sum(c.results["auto"].heaviest < c.results[REFERENCE].heaviest for c in ran)
        checks.append((not worse, f"auto heaviest <= reference heaviest on {len(ran) - len(worse)}/{len(ran)} "
                                  f"cases where the reference ran ({lighter} strictly lighter)"
                       + ("; heavier: " + ", ".join(f"{c.dist} n={c.n} k={c.k}" for c in worse) if worse else "")))
        kk_same = sum(c.results["kk"].heaviest == c.results[REFERENCE].heaviest for c in ran)
        checks.append(("INFO", f"seqflow kk heaviest equals the reference's on {kk_same}/{len(ran)} cases "
                             "(same algorithm, expected all)"))
    else:
        checks.append((None, "auto heaviest <= reference heaviest: no reference runs"))

    gap_cases = [c for c in cases if c.dist == "lognormal" and c.n >= 10 * c.k]
    if gap_cases:
        worst = max(gap_cases, key=lambda c: c.results["auto"].gap)
        failing = [c for c in gap_cases if c.results["auto"].gap >= GAP_TARGET]
        checks.append((not failing, f"auto gap < {GAP_TARGET:.1%} for lognormal, n/k >= 10: "
                                    f"{len(gap_cases) - len(failing)}/{len(gap_cases)} cases, worst "
                                    f"{worst.results['auto'].gap:.2e} (n={worst.n} k={worst.k})"
                       + ("; failing: " + ", ".join(f"n={c.n} k={c.k} gap={c.results['auto'].gap:.2e}"
                                                     for c in failing) if failing else "")))

    big = [c for c in cases if c.n == BIG_N and c.k == BIG_K]
    if big:
        parts = ", ".join(f"{c.dist} {fmt_time(c.results['auto'].seconds)}" for c in big)
        slowest = max(c.results["auto"].seconds for c in big)
        checks.append((slowest < BIG_TIME_TARGET, f"auto n={BIG_N:,} k={BIG_K:,} < {BIG_TIME_TARGET} s "
                                                  f"(best of 7+ runs): {parts}"))
    else:
        probes = {d: v for d, v in memory.items() if not isinstance(v, str)}
        if probes:
            parts = ", ".join(f"{d} {fmt_time(v[4])}" for d, v in probes.items())
            slowest = max(v[4] for v in probes.values())
            checks.append((slowest < BIG_TIME_TARGET, f"auto n={BIG_N:,} k={BIG_K:,} < {BIG_TIME_TARGET} s "
                                                      f"(best warm call of the memory probe): {parts}"))
    probes = {d: v for d, v in memory.items() if not isinstance(v, str)}
    if len(probes) == len(memory) and probes:
        peak_dist = max(probes, key=lambda d: probes[d][1])
        peak = probes[peak_dist][1]
        checks.append((peak < PEAK_MB_TARGET, f"peak memory of auto n={BIG_N:,} k={BIG_K:,} < {PEAK_MB_TARGET:.0f} MB: "
                                              f"process peak {peak:.0f} MB ({peak_dist}; delta "
                                              f"{probes[peak_dist][1] - probes[peak_dist][0]:+.0f} MB)"))
    else:
        checks.append((False, "peak memory: the probe failed (see above)"))

    emit("## Targets")
    emit()
    for ok, text in checks:
        status = ok if isinstance(ok, str) else ("SKIP" if ok is None else ("PASS" if ok else "FAIL"))
        emit(f"{status}  {text}")
    emit()
    emit(f"total run time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
