#!/usr/bin/env python3
"""Streaming benchmark: seqflow's embedded client from Python.

    python bench/streaming_bench.py [--quick] [--fetches N] [--reps N] [--controller-bench PATH]

Prints, as plain text:
  1. get_meta latency: a partition holds 65,536 ready samples x 8 fields
     (custom_meta {"total_lengths": L} each); seqflow.Client.get_meta fetches
     batches of 256 for one task (sequential sampler, polling), each fetch
     followed by an untimed refill of 256 samples so that 65,536 stay ready.
     Consumed samples stay in the partition: rows after 0, 100,000, 500,000
     and 1,000,000 consumed (--quick: 0 and 100,000), --fetches timed fetches
     each (350 at most keeps a row's own fetches short of the next row's
     history: 350 x 256 < 100,000), with p10 / p50 / p99
     and the p50 against the first row. The process's resident size after
     the last row is shown too (controller and storage of every live sample).
  2. put / get bandwidth on TransferQueue's small perf shape, 1,024 samples x
     9 fields x 8,192 float32 (288 MiB): numpy memcpy of the same bytes into
     preallocated arrays (the ceiling) and into fresh arrays (page faults
     included), seqflow put (GB/s), seqflow get_data (time; zero copy is
     checked with np.shares_memory across two gets). --reps runs each: the
    first (a cold process), the median and the best; targets use the median.
  3. The C++ controller benchmark (bench/controller_bench.cc) when its binary
     is found (--controller-bench, or build/bench-rel/seqflow_controller_bench):
     its table, memory line and targets are printed as they are.
  4. PASS/FAIL lines for the targets, all measured in this run.

Timings on a shared machine are noisy: read percentiles and ratios. The exit
code is 0 whatever the targets say.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from run_header import run_header

import seqflow

REPO = Path(__file__).resolve().parents[1]
READY = 65_536
BATCH = 256
FIELDS = ["input_ids", "attention_mask", "position_ids", "responses", "old_log_prob", "ref_log_prob",
          "advantages", "rewards"]
FETCH_FIELDS = ["input_ids", "old_log_prob", "advantages"]
FULL_HISTORY = (0, 100_000, 500_000, 1_000_000)
QUICK_HISTORY = (0, 100_000)
PUT_SAMPLES, PUT_FIELDS, PUT_SEQ = 1_024, 9, 8_192

P50_TARGET_US = 150.0
FLAT_TARGET = 1.5
PUT_TARGET_GBS = 5.0
GB = 1e9


def emit(text: str = "") -> None:
    print(text, flush=True)


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def table(header, rows, align) -> str:
    cells = [list(map(str, header))] + [list(map(str, r)) for r in rows]
    widths = [max(len(row[c]) for row in cells) for c in range(len(header))]
    lines = []
    for i, row in enumerate(cells):
        parts = [cell.ljust(w) if a == "l" else cell.rjust(w) for cell, w, a in zip(row, widths, align)]
        lines.append("  " + "  ".join(parts).rstrip())
        if i == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def percentile(values, q: float) -> float:
    return float(np.percentile(np.asarray(values), q, method="lower"))


# --------------------------------------------------------------------------
# 1. get_meta latency


class Refill:
    """Puts produced samples: 8 one-byte fields, custom_meta total_lengths
    (none when with_meta is False: the diagnostic row)."""

    def __init__(self, client, partition: str, with_meta: bool = True):
        self.client = client
        self.with_meta = with_meta
        self.partition = partition
        self.serial = 0
        self._data = {}

    def __call__(self, n: int) -> None:
        data = self._data.get(n)
        if data is None:
            data = self._data[n] = {f: np.zeros((n, 1), dtype=np.int8) for f in FIELDS}
        meta = None
        if self.with_meta:
            meta = [{"total_lengths": 100 + (self.serial + i) * 7919 % 16000} for i in range(n)]
        self.serial += n
        self.client.put(data, partition_id=self.partition, custom_meta=meta)


def bench_get_meta(history, fetches: int, with_meta: bool = True, read_meta: bool = False):
    client = seqflow.Client()  # embedded, sequential sampler
    partition = "train@global_step_0"
    refill = Refill(client, partition, with_meta)
    rss_before = resident_mb()
    for _ in range(READY // 8192):
        refill(8192)
    consumed = 0

    def fetch(n: int) -> int:
        meta = client.get_meta(FETCH_FIELDS, n, partition, task_name="actor_update", polling=True)
        return meta.size

    rows = []
    for target in history:
        while consumed + READY <= target:  # advance the history in large batches
            assert fetch(READY) == READY
            consumed += READY
            for _ in range(READY // 8192):
                refill(8192)
        while consumed < target:
            consumed += fetch(BATCH)
            refill(BATCH)
        progress(f"get_meta: {consumed:,} consumed, timing {fetches} fetches"
                 + ("" if with_meta else " (no custom_meta)"))
        start_consumed = consumed
        for _ in range(20):  # warm-up
            consumed += fetch(BATCH)
            refill(BATCH)
        us = []
        for _ in range(fetches):
            t0 = time.perf_counter_ns()
            meta = client.get_meta(FETCH_FIELDS, BATCH, partition, task_name="actor_update", polling=True)
            if read_meta:
                meta.custom_meta  # decoded on first access
            us.append((time.perf_counter_ns() - t0) / 1e3)
            if meta.size != BATCH:
                raise RuntimeError(f"fetch returned {meta.size} samples, expected {BATCH}")
            consumed += BATCH
            refill(BATCH)
        rows.append({"consumed_before": start_consumed, "live": start_consumed + READY, "fetches": fetches,
                     "p10": percentile(us, 10), "p50": percentile(us, 50), "p99": percentile(us, 99),
                     "mean": float(np.mean(us))})
    rss_after = resident_mb()
    live = consumed + READY
    client.close()
    return rows, rss_before, rss_after, live


# --------------------------------------------------------------------------
# 2. put / get bandwidth


class Timing:
    """Seconds of repeated runs: the first (a cold process), the median and the best."""

    def __init__(self, times):
        self.times = list(times)
        self.first = self.times[0]
        self.median = float(np.median(self.times))
        self.best = min(self.times)


def timed(fn, reps: int, setup=None):
    """(Timing, last result) of reps runs of fn; setup runs untimed before each."""
    times = []
    result = None
    for _ in range(reps):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return Timing(times), result


def bench_put_get(reps: int):
    rng = np.random.default_rng(0)
    data = {f"field_{i}": rng.random((PUT_SAMPLES, PUT_SEQ), dtype=np.float32) for i in range(PUT_FIELDS)}
    nbytes = sum(a.nbytes for a in data.values())
    out = {"bytes": nbytes}

    # The ceiling: numpy memcpy of the same bytes.
    dest = {k: np.empty_like(v) for k, v in data.items()}
    for k, v in data.items():  # fault the pages in first: "preallocated"
        np.copyto(dest[k], v)

    def copy_prealloc():
        for k, v in data.items():
            np.copyto(dest[k], v)

    out["memcpy"], _ = timed(copy_prealloc, reps)
    del dest
    gc.collect()

    client = seqflow.Client()
    counter = [0]

    def put():
        counter[0] += 1
        return client.put(data, partition_id=f"perf_{counter[0]}")

    def clear_previous():
        for p in client.get_partition_list():
            client.clear_partition(p)
        gc.collect()

    out["put"], _ = timed(put, reps, setup=clear_previous)
    partition = f"perf_{counter[0]}"
    names = list(data)
    meta = client.get_meta(names, PUT_SAMPLES, partition, mode="force_fetch")

    out["get"], got = timed(lambda: client.get_data(meta, format="numpy", copy=False), max(reps, 5))
    again = client.get_data(meta, format="numpy", copy=False)
    out["get_copy"], _ = timed(lambda: client.get_data(meta, format="numpy"), max(reps, 5))
    out["zero_copy"] = all(np.shares_memory(got[k], again[k]) for k in names)
    out["correct"] = all(np.array_equal(got[k], data[k]) for k in names)
    out["writeable"] = any(got[k].flags.writeable for k in names)
    try:
        import torch  # noqa: F401

        out["get_torch"], got_t = timed(lambda: client.get_data(meta, format="torch", copy=False), max(reps, 5))
        again_t = client.get_data(meta, format="torch", copy=False)
        out["get_torch_copy"], _ = timed(lambda: client.get_data(meta, format="torch"), max(reps, 5))
        out["zero_copy_torch"] = all(got_t[k].data_ptr() == again_t[k].data_ptr()
                                     and np.shares_memory(got_t[k].numpy(), got[k]) for k in names)
    except ImportError:
        out["get_torch"] = None
    client.close()
    del got, again
    gc.collect()

    def copy_fresh():  # after the put, so that the put's first run meets fresh memory
        return {k: v.copy() for k, v in data.items()}

    out["memcpy_fresh"], fresh = timed(copy_fresh, reps)
    return out


def put_get_in_child(reps: int) -> dict:
    """bench_put_get in a fresh process, so that the first put meets the
    memory of a process that just started (not memory this benchmark freed)."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import streaming_bench as b; "
            "out = b.bench_put_get(int(sys.argv[2])); "
            "print(json.dumps({k: (v.times if isinstance(v, b.Timing) else v) for k, v in out.items()}))")
    done = subprocess.run([sys.executable, "-c", code, str(Path(__file__).resolve().parent), str(reps)],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"the put / get child failed: {done.stderr.strip()[-500:]}")
    raw = json.loads(done.stdout.strip().splitlines()[-1])
    return {k: (Timing(v) if isinstance(v, list) else v) for k, v in raw.items()}


# --------------------------------------------------------------------------
# 3. The C++ controller benchmark


def find_controller_bench(path):
    candidates = [Path(path)] if path else [REPO / "build" / "bench-rel" / "seqflow_controller_bench"]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    return None


def run_controller_bench(binary: Path, quick: bool):
    command = [str(binary)] + (["--quick"] if quick else [])
    progress(f"running {shlex.join(command)}")
    done = subprocess.run(command, capture_output=True, text=True, timeout=1200)
    return done.returncode, done.stdout, done.stderr


# --------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="smoke test (< 30 s): history rows 0 and 100,000, fewer fetches and repetitions")
    parser.add_argument("--fetches", type=int, default=None, help="timed fetches per row (default 350; quick 200)")
    parser.add_argument("--reps", type=int, default=None, help="put / memcpy repetitions (default 7; quick 3)")
    parser.add_argument("--controller-bench", default=None, metavar="PATH",
                        help="the seqflow_controller_bench binary (default build/bench-rel/seqflow_controller_bench)")
    args = parser.parse_args(argv)
    fetches = args.fetches or (200 if args.quick else 350)
    reps = args.reps or (3 if args.quick else 7)
    history = QUICK_HISTORY if args.quick else FULL_HISTORY
    started = time.perf_counter()

    for line in run_header(seqflow):
        emit(line)
    emit(f"mode: {'quick' if args.quick else 'full'}; {fetches} timed fetches per row, {reps} runs for bandwidth")
    emit()

    rows, rss_before, rss_after, live = bench_get_meta(history, fetches)
    bare = bench_get_meta((0,), fetches, with_meta=False)[0][0]
    read = bench_get_meta((0,), fetches, read_meta=True)[0][0]
    progress("put / get bandwidth (fresh process)")
    bw = put_get_in_child(reps)

    emit("## get_meta from Python (seqflow.Client, embedded, sequential sampler)")
    emit()
    emit(f"get_meta({FETCH_FIELDS}, batch_size={BATCH}, task_name=..., polling=True) from {READY:,} ready samples "
         f"x {len(FIELDS)} fields; a refill of {BATCH} after every fetch (untimed). Wall clock per call "
         "(time.perf_counter_ns), including the BatchMeta; custom_meta is decoded to dicts on first access.")
    emit()
    first = rows[0]["p50"]
    emit(table(["consumed before", "live samples", "fetches", "p10 us", "p50 us", "p99 us", "mean us",
                "p50 vs first row"],
               [[label, f"{r['live']:,}", r["fetches"], f"{r['p10']:.1f}", f"{r['p50']:.1f}",
                 f"{r['p99']:.1f}", f"{r['mean']:.1f}", f"{r['p50'] / first:.2f}x"]
                for label, r in [(f"{r['consumed_before']:,}", r) for r in rows]
                + [("(diagnostic) 0, no custom_meta", bare),
                   ("(diagnostic) 0, custom_meta read", read)]],
               "lrrrrrrr"))
    emit("The diagnostic rows are not targets: they show what carrying custom_meta costs a fetch, and what "
         "reading it (256 dicts) adds.")
    emit()
    emit(f"Resident size of this process: {rss_before:.0f} MB before, {rss_after:.0f} MB with {live:,} live samples "
         f"x {len(FIELDS)} one-byte fields (controller + storage): {(rss_after - rss_before) * 2**20 / live:,.0f} "
         "bytes per sample.")
    emit()

    emit(f"## put / get: {PUT_SAMPLES:,} samples x {PUT_FIELDS} fields x {PUT_SEQ:,} float32 "
         f"({bw['bytes'] / 2**20:.0f} MiB), {reps} runs each, in a fresh process")
    emit()
    nbytes = bw["bytes"]
    memcpy = bw["memcpy"].median

    def rate(t: float) -> str:
        return f"{nbytes / t / GB:.2f}"

    def row(name, t: Timing, note, moves_bytes=True):
        if moves_bytes:
            return [name, f"{t.first * 1e3:.2f}", f"{t.median * 1e3:.2f}", f"{t.best * 1e3:.2f}", rate(t.first),
                    rate(t.median), rate(t.best), f"{memcpy / t.median:.2f}x", note]
        return [name, f"{t.first * 1e3:.3f}", f"{t.median * 1e3:.3f}", f"{t.best * 1e3:.3f}", "-", "-", "-",
                f"{memcpy / t.median:,.0f}x", note]

    bw_rows = [
        row("numpy memcpy, preallocated (np.copyto)", bw["memcpy"], "the ceiling"),
        row("numpy copy, fresh arrays (ndarray.copy)", bw["memcpy_fresh"], "allocates like a put"),
        row("seqflow put (new partition)", bw["put"], "one copy into storage buffers"),
        row("seqflow get_data, numpy (default)", bw["get_copy"], "one copy: the caller's arrays"),
        row("seqflow get_data, numpy, copy=False", bw["get"], "zero copy" if bw["zero_copy"] else "COPIES", False),
    ]
    if bw.get("get_torch") is not None:
        bw_rows.append(row("seqflow get_data, torch (default)", bw["get_torch_copy"], "one copy: the caller's tensors"))
        bw_rows.append(row("seqflow get_data, torch, copy=False", bw["get_torch"],
                           "zero copy" if bw.get("zero_copy_torch") else "COPIES", False))
    emit(table(["operation", "first ms", "median ms", "best ms", "GB/s first", "GB/s median", "GB/s best",
                "speed vs memcpy (median)", "note"], bw_rows, "lrrrrrrrl"))
    emit()
    emit("GB/s = bytes / time (1 GB = 1e9 bytes). first: the first run in this process (fresh memory: every page "
         "of a new buffer is faulted in); later runs may reuse memory the previous run gave back (the put's "
         "setup clears the previous partition). "
         "A get with copy=False moves no bytes; the default get copies once. "
         f"Zero copy: np.shares_memory between the arrays of two get_data(copy=False) calls = {bw['zero_copy']}; "
         f"values equal to the put's = {bw['correct']}; numpy arrays read-only = {not bw['writeable']}.")
    emit()

    cpp = find_controller_bench(args.controller_bench)
    cpp_targets = []
    emit("## C++ controller benchmark (bench/controller_bench.cc)")
    emit()
    if cpp is None:
        emit("not found: build it with --target seqflow_controller_bench (see the file's header), or pass "
             "--controller-bench PATH")
    else:
        code, out, err = run_controller_bench(cpp, args.quick)
        for line in out.splitlines():
            if line.strip().startswith(("PASS", "FAIL", "SKIP")):
                cpp_targets.append(line.strip())
            elif line.strip() != "Targets":
                emit(line)
        if code != 0:
            emit(f"(exit code {code}: {err.strip()[-300:]})")
    emit()

    # ---- targets
    checks = []
    worst = max(r["p50"] for r in rows)
    checks.append((worst <= P50_TARGET_US,
                   f"get_meta fetch of 256 from 65,536 ready x 8 fields: p50 <= {P50_TARGET_US:.0f} us from Python "
                   f"(worst row {worst:.1f} us)"))
    flat = rows[-1]["p50"] / rows[0]["p50"]
    checks.append((flat <= FLAT_TARGET,
                   f"flat as consumed history grows to {rows[-1]['consumed_before']:,} (Python): p50 ratio "
                   f"{flat:.2f}x (<= {FLAT_TARGET:.1f}x)"
                   + ("" if history[-1] >= 1_000_000 else " [quick: 1,000,000 is measured in the full run]")))
    put = bw["put"]
    put_gbs = nbytes / put.median / GB
    checks.append((put_gbs >= PUT_TARGET_GBS,
                   f"embedded put of 1,024 x 9 x 8,192 float32 >= {PUT_TARGET_GBS:.0f} GB/s (median of {reps}): "
                   f"{put_gbs:.2f} GB/s, {memcpy / put.median:.2f}x of the memcpy ceiling "
                   f"({nbytes / memcpy / GB:.2f} GB/s); first put of the process {nbytes / put.first / GB:.2f} GB/s"))
    get = bw["get"].median
    checks.append((bw["zero_copy"] and bw["correct"] and get < 0.1 * memcpy,
                   f"embedded get zero-copy: the arrays of two gets share memory = {bw['zero_copy']}, values "
                   f"correct = {bw['correct']}; get {get * 1e3:.2f} ms vs memcpy {memcpy * 1e3:.1f} ms "
                   f"({memcpy / get:.0f}x faster; a copy could not take under 0.1x memcpy's time)"))
    emit("## Targets")
    emit()
    for ok, text in checks:
        emit(f"  {'PASS' if ok else 'FAIL'}  {text}")
    for line in cpp_targets:
        emit(f"  {line}  [C++]")
    if cpp is None:
        emit("  SKIP  C++ get_meta p50 <= 50 us, flatness and controller memory < 300 MB: "
             "seqflow_controller_bench not built")
    emit()
    emit(f"total time {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
