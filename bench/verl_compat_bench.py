"""seqflow.compat.verl against an earlier revision of itself, side by side in
one interpreter: the calls whose partitioning moved from Python into the
engine (greedy_partition, get_group_balanced_partitions,
rearrange_micro_batches). The earlier compat/verl.py is read from git and
imported beside the installed one (it calls the same installed engine).
Rounds alternate (A, B, A, B, ...); per row the medians' ratio B / A and the
noise floor: the spread (max / min) of A's round medians. A ratio within it
is no difference. Results are checked identical on every row.

    .venv/bin/python bench/verl_compat_bench.py [--baseline REV] [--rounds 7] [--calls 200]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from tensordict import TensorDict

import seqflow
from seqflow.compat import verl as current

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_header import run_header  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def baseline_module(revision: str):
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{revision}:python/seqflow/compat/verl.py"],
                            check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "verl_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("verl_baseline", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def padded_batch(lengths: np.ndarray, width: int) -> TensorDict:
    mask = torch.arange(width)[None, :] < torch.as_tensor(lengths)[:, None]
    # int8: the rows' copies (the same in A and B) stay small beside the planning.
    return TensorDict({"input_ids": torch.zeros(len(lengths), width, dtype=torch.int8),
                       "attention_mask": mask.to(torch.int8)}, batch_size=[len(lengths)])


def rows(rng: np.random.Generator):
    """(name, call(module) -> comparable result)."""
    lengths = np.minimum(rng.lognormal(6.0, 1.0, 2048), 4096).astype(np.int64)
    as_list = lengths.tolist()
    uids = [f"prompt-{i // 8}" for i in range(2048)]
    batch = padded_batch(lengths[:512], 4096)
    return [
        ("greedy_partition n=2048 k=16", lambda m: m.greedy_partition(as_list, 16, False)),
        ("greedy_partition n=2048 k=16 equal", lambda m: m.greedy_partition(as_list, 16, True)),
        ("get_group_balanced_partitions n=2048 uids=256 k=8",
         lambda m: m.get_group_balanced_partitions(as_list, uids, 8)),
        ("rearrange_micro_batches n=512 cap=16384", lambda m: m.rearrange_micro_batches(batch, 16384)[1]),
        ("rearrange_micro_batches n=512 cap=8192 group=4 min=8",
         lambda m: m.rearrange_micro_batches(batch, 8192, force_group_size=4, min_num_micro_batch=8)[1]),
    ]


def median_seconds(call, module, calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call(module)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="65ade4d",
                        help="the git revision of compat/verl.py to compare with (default: the last that planned in Python)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200, help="calls per row and round")
    args = parser.parse_args()
    print("\n".join(run_header(seqflow)))
    old = baseline_module(args.baseline)
    print(f"A = compat/verl.py at {args.baseline}, B = the installed seqflow.compat.verl\n")
    print("| call | A median | B median | B / A | noise (A max / min) | identical |")
    print("|---|---|---|---|---|---|")
    for name, call in rows(np.random.default_rng(0)):
        identical = call(old) == call(current)
        a_medians, b_medians = [], []
        for _ in range(args.rounds):
            a_medians.append(median_seconds(call, old, args.calls))
            b_medians.append(median_seconds(call, current, args.calls))
        a, b = statistics.median(a_medians), statistics.median(b_medians)
        noise = max(a_medians) / min(a_medians)
        print(f"| {name} | {a * 1e6:.0f} us | {b * 1e6:.0f} us | {b / a:.2f} | {noise:.2f} | {identical} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
