"""Two installs of seqflow side by side: the cost of one client call from
Python (put, get_meta, get_data, kv_batch_put, kv_batch_get), embedded and
remote, on batches small enough that the call's own overhead (argument
checks, conversions, crossings into C++) is what is measured. Each install
runs in its own interpreter, alternately (A, B, A, B, ...) so that the
machine's drift falls on both; per row the ratio B / A of the medians over
the rounds. The noise floor is A against itself: the spread of A's own
rounds (max / min of its medians), printed beside each ratio; a ratio within
it is no difference.

    python bench/ab_python_calls.py OLD_VENV/bin/python NEW_VENV/bin/python [--rounds 5]

An older commit's install, e.g.:
    git worktree add /tmp/old <commit> && python3 -m venv /tmp/old/.venv &&
    /tmp/old/.venv/bin/pip install numpy nanobind scikit-build-core cmake ninja &&
    /tmp/old/.venv/bin/pip install --no-build-isolation /tmp/old
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

ROWS, FIELDS = 16, 2  # a batch small enough that the call's overhead dominates

# What each interpreter runs: the microseconds per call of each row, as JSON.
CHILD = r"""
import json, sys, time
import numpy as np
import seqflow

CALLS, ROWS, FIELDS = (int(arg) for arg in sys.argv[1:4])

def per_call(function, calls=CALLS):
    function()  # warm: first-use imports and allocations are not the steady state
    start = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - start) / calls * 1e6

def rows(client, mode):
    data = {f"f{i}": np.arange(ROWS * 8, dtype=np.float32).reshape(ROWS, 8) for i in range(FIELDS)}
    keys = [f"k{i}" for i in range(ROWS)]
    client.put(data, partition_id="p")
    meta = client.get_meta(list(data), ROWS, "p", mode="force_fetch")
    out = {
        f"{mode} put": per_call(lambda: client.put(data, partition_id="q")),
        f"{mode} get_meta": per_call(lambda: client.get_meta(list(data), ROWS, "p", mode="force_fetch")),
        f"{mode} get_data": per_call(lambda: client.get_data(meta, format="numpy")),
        f"{mode} kv_batch_put": per_call(lambda: client.kv_batch_put(keys, "kv", data)),
        f"{mode} kv_batch_get": per_call(lambda: client.kv_batch_get(keys, "kv", format="numpy")),
    }
    client.clear_partition("q")
    return out

result = rows(seqflow.Client(), "embedded")
controller = seqflow.serve_controller("tcp://127.0.0.1:0")
storage = seqflow.serve_storage(controller.endpoint)
client = seqflow.Client.remote(controller.endpoint)
result.update(rows(client, "remote"))
client.close()
storage.stop()
controller.stop()
print(json.dumps(result))
"""


def run(python: str, calls: int) -> dict[str, float]:
    done = subprocess.run([python, "-c", CHILD, str(calls), str(ROWS), str(FIELDS)], capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{python} failed ({done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="the baseline install's python")
    parser.add_argument("b", help="the install compared with it")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000, help="calls per row and round")
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"a": [], "b": []}
    for round_index in range(args.rounds):
        for side in ("a", "b"):
            runs[side].append(run(getattr(args, side), args.calls))
        print(f"round {round_index + 1} of {args.rounds} done", file=sys.stderr)
    print(f"us per call (median of {args.rounds} rounds; {args.calls} calls each, {ROWS} rows x {FIELDS} fields)")
    print(f"{'call':<24} {'A':>9} {'B':>9} {'B / A':>7} {'A noise':>8}")
    for row in runs["a"][0]:
        a = [r[row] for r in runs["a"]]
        b = [r[row] for r in runs["b"]]
        ratio = statistics.median(b) / statistics.median(a)
        print(f"{row:<24} {statistics.median(a):>9.1f} {statistics.median(b):>9.1f} {ratio:>7.2f} "
              f"{max(a) / min(a):>8.2f}")
    print("B / A below 1: B is faster. A noise: max / min of A's own rounds; a ratio within it is no difference.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
