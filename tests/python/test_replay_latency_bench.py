"""bench/replay_latency_bench.py's drop-in column, small: 8 producers complete two steps of groups against
a `seqflow serve` pair, the drop-in reports and samples each completed group exactly once (the bench
raises otherwise), and the row's numbers come from what ran."""

from __future__ import annotations

import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import replay_latency_bench as bench  # noqa: E402


def test_drop_in_row_reports_every_completed_group_once():
    args = bench.argparse.Namespace(steps=2, groups_per_step=30, rate=200.0, producer_processes=2,
                                    producer_threads=4)
    with ProcessPoolExecutor(args.producer_processes, mp_context=get_context("spawn")) as pool:
        row = bench.seqflow_row(bench.DROP_IN, 2_000, args, pool)
    assert len(row["latencies_ms"]) == args.steps * args.groups_per_step
    assert all(latency < bench.ROW_TIMEOUT * 1e3 for latency in row["latencies_ms"])
    assert not any(row["exactly_once"].values()), row["exactly_once"]
    assert row["listings"] >= args.steps  # at least one replay pass per sample()
    assert row["bytes_per_step"] > 0 and row["cpu_per_step"] > 0
