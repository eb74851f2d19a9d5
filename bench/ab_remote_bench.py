"""Two builds of seqflow_remote_bench side by side: the throughput table of
each, run alternately (A, B, A, B, ...) so that the machine's drift falls
on both, and per row the ratio B / A of the medians over the rounds, for
TCP and same-host (local copy) puts and gets. The noise floor is A against
itself: the spread of A's own rounds (max / min of its medians), printed
beside each ratio; a ratio within it is no difference.

    python bench/ab_remote_bench.py OLD/seqflow_remote_bench NEW/seqflow_remote_bench [--rounds 5]

Build an older commit's bench in a worktree, e.g.:
    git worktree add /tmp/old <commit> && cmake -S /tmp/old -B /tmp/old/build -G Ninja \\
        -DCMAKE_BUILD_TYPE=Release -DSEQFLOW_SANITIZE= && cmake --build /tmp/old/build --target seqflow_remote_bench
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys

# "1024x9  1  288 | 1.83 / 1.69  1.70 / 1.48  17.62 / 14.95 | 2.02 / 1.78 ..." : best / median pairs.
ROW = re.compile(r"^(\d+x\d+)\s+(\d+)\s+(\d+)\s+\|(.*)\|(.*)\|")
COLUMNS = ("put TCP", "put local", "get TCP", "get local")


def medians_of(output: str) -> dict[tuple[str, str], dict[str, float]]:
    """Per (payload, units) row: the median GB/s of each column."""
    rows = {}
    for line in output.splitlines():
        match = ROW.match(line.strip())
        if not match:
            continue
        put = [float(x) for x in re.findall(r"[\d.]+", match.group(4))]
        get = [float(x) for x in re.findall(r"[\d.]+", match.group(5))]
        # best/median of: seqflow TCP, raw ZeroMQ, seqflow local copy.
        rows[(match.group(1), match.group(2))] = {"put TCP": put[1], "put local": put[5], "get TCP": get[1],
                                                  "get local": get[5]}
    if not rows:
        raise SystemExit("no throughput rows in the bench's output:\n" + output)
    return rows


def run(binary: str, quick: bool) -> dict:
    command = [binary, "--only", "throughput"] + (["--quick"] if quick else [])
    # Both sides at the cache size the bench sets itself since 2026-12-07 (an
    # older build would run at the 2 GiB default, where the large rows fault
    # fresh memory in): the same setting for A and B.
    env = {**os.environ, "SEQFLOW_BLOCK_CACHE_MB": os.environ.get("SEQFLOW_BLOCK_CACHE_MB", "8192")}
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False, env=env)
    if done.returncode not in (0, 1):  # 1: a target of the bench's own missed; the table is there
        raise SystemExit(f"{binary} failed ({done.returncode}):\n{done.stderr}")
    return medians_of(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="the baseline build's seqflow_remote_bench")
    parser.add_argument("b", help="the build compared with it")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--full", action="store_true", help="the bench's full sizes (else --quick)")
    args = parser.parse_args()
    runs = {"a": [], "b": []}
    for round_number in range(args.rounds):
        for side in ("a", "b"):
            runs[side].append(run(getattr(args, side), not args.full))
        print(f"round {round_number + 1}/{args.rounds} done", file=sys.stderr)

    print(f"== B / A, median GB/s over {args.rounds} alternating rounds (A: {args.a}; B: {args.b})")
    print("   each cell: ratio (A's own spread: max/min of its rounds' medians, the noise floor)")
    header = f"{'payload':<9}{'units':>6} | " + " | ".join(f"{name:>18}" for name in COLUMNS)
    print(header)
    for row in runs["a"][0]:
        cells = []
        for column in COLUMNS:
            a_values = [r[row][column] for r in runs["a"]]
            b_values = [r[row][column] for r in runs["b"]]
            ratio = statistics.median(b_values) / statistics.median(a_values)
            spread = max(a_values) / min(a_values)
            cells.append(f"{ratio:6.2f} (noise {spread:4.2f})")
        print(f"{row[0]:<9}{row[1]:>6} | " + " | ".join(f"{cell:>18}" for cell in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
