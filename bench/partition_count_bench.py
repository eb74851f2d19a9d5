"""Remote put latency against the number of live partitions.

A job that keeps a partition per step adds partitions all along; a put must
cost the same at the 20,000th as at the 100th (it used to list every
partition first: 0.6 ms at 100 live, 10 ms at 20,000). Starts a controller
and one storage unit as `seqflow serve` processes on 127.0.0.1, grows the
partition count to each row's (one small put each) and times puts of 8
samples x 1024 float32 into fresh partitions; beside them, puts that list
the partitions first, as every put did before. The first row is timed
again at the end: the two readings of the same row are the run's noise.

    .venv/bin/python bench/partition_count_bench.py [--puts 400] [--counts 100,10000,20000]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import seqflow

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_header import run_header  # noqa: E402

TARGET_RATIO = 1.2  # the bound: every row's p50 within 1.2x of the others


class Serve:
    """`seqflow serve ROLE ...` until stopped; endpoint from its serving line."""

    def __init__(self, role: str, *args: str):
        command = shutil.which("seqflow") or str(Path(sys.executable).parent / "seqflow")
        self.process = subprocess.Popen([command, "serve", role, "--bind", "tcp://127.0.0.1:0", *args],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.process.stdout.readline()
        if "serving on" not in line:
            self.stop()
            raise RuntimeError(f"seqflow serve {role} did not start: {line!r}")
        self.endpoint = line.split("serving on ")[1].split()[0]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)


def put_latencies(client, puts: int, prefix: str, list_first: bool = False) -> np.ndarray:
    """ms per put; list_first: each put also lists the partitions, as every
    put did before (the side-by-side baseline)."""
    data = {"x": np.ones((8, 1024), dtype=np.float32)}
    times = []
    for i in range(puts):
        start = time.perf_counter()
        if list_first:
            client.get_partition_list()
        client.put(data, partition_id=f"{prefix}-{i}")
        times.append(time.perf_counter() - start)
    return np.array(times) * 1e3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--puts", type=int, default=400, help="timed puts per row")
    parser.add_argument("--counts", default="100,10000,20000", help="live partitions of each row")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",")]
    print("\n".join(run_header(seqflow)))
    controller = Serve("controller", "--storage-units", "1")
    unit = Serve("storage", "--controller", controller.endpoint)
    rows = []
    try:
        client = seqflow.Client.remote(controller.endpoint, timeout=60.0)
        small = {"x": np.zeros((1, 1), dtype=np.float32)}
        live = 0
        for count in counts:
            while live < count:
                client.put(small, partition_id=f"filler-{live}")
                live += 1
            times = put_latencies(client, args.puts, f"row{count}")
            listing = put_latencies(client, args.puts // 4, f"listing{count}", list_first=True)
            live += args.puts + args.puts // 4
            rows.append((f"{count:,}", times, listing))
        times = put_latencies(client, args.puts, "again")
        rows.append((f"{counts[0]:,} (again: the noise)", times, None))
        client.close()
    finally:
        unit.stop()
        controller.stop()

    base = np.median(rows[0][1])
    print(f"\nremote put of 8 x 1024 float32 into a fresh partition, {args.puts} puts per row, "
          f"one controller and one unit (seqflow serve) on 127.0.0.1\n")
    print("| live partitions | put p50 (ms) | put p90 (ms) | p50 / first row | put + partition list p50 (ms): what a put cost before |")
    print("|---|---:|---:|---:|---:|")
    for name, times, listing in rows:
        p50, p90 = np.median(times), np.percentile(times, 90)
        before = "" if listing is None else f"{np.median(listing):.3f}"
        print(f"| {name} | {p50:.3f} | {p90:.3f} | {p50 / base:.2f} | {before} |")
    medians = [np.median(times) for _, times, _ in rows[:-1]]
    noise = abs(np.median(rows[-1][1]) / base - 1)
    spread = max(medians) / min(medians)
    verdict = "PASS" if spread <= TARGET_RATIO else "FAIL"
    print(f"\n{verdict} every row's p50 within {TARGET_RATIO}x of the others: highest / lowest {spread:.2f}x "
          f"(noise floor: the first row read twice differs by {noise:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
