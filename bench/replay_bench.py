"""One replay pass against the number of stored keys, beside one kv_list.

verl 0.9.1's V1 ReplayBuffer lists every key of the partition (kv_list) on
every poll and decides in Python; seqflow's drop-in runs one replay_pass in
the controller instead. This fills an embedded client's partition "train"
with verl's layout (prompt keys `{uid}` tagged is_prompt / status /
global_steps, GROUP trajectories `{uid}_{s}_0` each tagged with a reward),
most groups in flight (status "running", their trajectories written) and
FINISHED groups finished, at each row's key count, and times:

- count: get_sampleable_count's pass (step "count") on an unchanged partition;
- idle: a sampling pass with too few groups sampleable (nothing changes);
- changed: a count pass after one prompt's tag changed (the pass parses that
  tag again and walks the partition's samples once);
- sample: a sampling pass of BATCH groups with a pass id and its
  acknowledgement, after the previous one's prompts were put back (what one
  training step costs the controller);
- sample versions: the same with staleness by policy version on
  (max_staleness_versions, strategy wait: the gate reads the oldest start
  version in flight; nothing is stale, so both select alike);
- kv_list: one kv_list of the partition (what verl's buffer does per poll).

Each timing repeats; p50 and p99 in ms. The first row is timed again at the
end: the spread between its two readings is the run's noise floor. The
issue's target is the sample pass (controller CPU per step) within 1.2x from
the smallest to the largest row; the last lines give that ratio for every
column. RSS per stored key: what filling the partition added, and what the
first replay pass added (its index over the keys).

    .venv/bin/python bench/replay_bench.py [--keys 10000,100000,1000000] [--repeat 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_header import run_header  # noqa: E402

GROUP = 8  # trajectories per prompt
FINISHED = 256  # finished groups at every row
BATCH = 16  # groups one sampling pass selects
TARGET_RATIO = 1.2
PUT_CHUNK = 50_000  # keys per kv_batch_put while filling


def fill(client, keys: int, finished_groups: int = FINISHED) -> list[str]:
    """The partition with `keys` keys in verl's layout, the first `finished_groups` groups finished; their uids.
    `client`: a seqflow client or the transfer_queue module (the same kv_batch_put)."""
    groups = keys // (GROUP + 1)
    names: list[str] = []
    tags: list[dict] = []
    finished = []
    for g in range(groups):
        uid = f"u{g:07d}"
        done = g < finished_groups
        if done:
            finished.append(uid)
        names.append(uid)
        tags.append({"is_prompt": True, "status": "finished" if done else "running", "global_steps": g % 4})
        for s in range(GROUP):
            names.append(f"{uid}_{s}_0")
            tags.append({"reward": float(s % 2)})
    for start in range(0, len(names), PUT_CHUNK):
        client.kv_batch_put(names[start:start + PUT_CHUNK], "train", tags=tags[start:start + PUT_CHUNK])
    return finished


def rss_bytes() -> int:
    """This process's resident memory (the embedded controller's included)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def timed(call, repeat: int) -> np.ndarray:
    times = np.empty(repeat)
    for i in range(repeat):
        start = time.perf_counter()
        call()
        times[i] = (time.perf_counter() - start) * 1000
    return times


def sampling(client, repeat: int, first_id: int, **options) -> np.ndarray:
    """Sampling passes of BATCH groups with a pass id and their acknowledgements, each batch put back after."""
    times = np.empty(repeat)
    for i in range(repeat):
        start = time.perf_counter()
        answer = client.replay_pass("train", 4, BATCH, pass_id=first_id + i, **options)
        client.ack_replay_pass("train", first_id + i)
        times[i] = (time.perf_counter() - start) * 1000
        assert answer.ready and len(answer.selected_uids) == BATCH
        client.kv_batch_put(list(answer.selected_uids), "train",  # put back: the next pass finds them again
                            tags=[{"is_prompt": True, "status": "finished", "global_steps": 0}] * BATCH)
    return times


def row(keys: int, repeat: int) -> dict:
    import seqflow

    client = seqflow.Client()
    try:
        empty = rss_bytes()
        finished = fill(client, keys)
        filled = rss_bytes()
        client.replay_pass("train", 4, 0, step="count")  # the first pass reads every key once
        indexed = rss_bytes()
        count = timed(lambda: client.replay_pass("train", 4, 0, step="count"), repeat)
        idle = timed(lambda: client.replay_pass("train", 4, FINISHED + 1), repeat)
        changed = np.empty(repeat)
        for i in range(repeat):
            client.kv_put(finished[0], "train", tag={"global_steps": i % 4})  # one tag changes, untimed
            start = time.perf_counter()
            client.replay_pass("train", 4, 0, step="count")
            changed[i] = (time.perf_counter() - start) * 1000
        sample = sampling(client, repeat, 1)
        sample_versions = sampling(client, repeat, repeat + 1, max_staleness_versions=1,
                                   max_off_policy_strategy="wait")
        listing = timed(lambda: client.kv_list("train"), max(3, repeat // 20))
        stored = keys // (GROUP + 1) * (GROUP + 1)
        return {"keys": stored, "count": count, "idle": idle, "changed": changed, "sample": sample,
                "sample versions": sample_versions, "kv_list": listing,
                "rss_stored": (filled - empty) / stored, "rss_replay": (indexed - filled) / stored}
    finally:
        client.close()


def pct(times: np.ndarray, q: float) -> float:
    return float(np.percentile(times, q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", default="10000,100000,1000000")
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    sizes = [int(k) for k in args.keys.split(",")]
    import seqflow  # here: fill() also runs where seqflow is not installed (TransferQueue's venv)

    print("\n".join(run_header(seqflow)))
    print(f"\ngroups of {GROUP} trajectories + 1 prompt key; {FINISHED} finished, the rest in flight; "
          f"sample selects {BATCH} (pass id + ack); {args.repeat} repeats (kv_list: {max(3, args.repeat // 20)})\n")
    rows = [row(keys, args.repeat) for keys in sizes]
    again = row(sizes[0], args.repeat)
    columns = ("count", "idle", "changed", "sample", "sample versions", "kv_list")
    print("| stored keys | " + " | ".join(f"{c} ms p50 / p99" for c in columns) +
          " | kv_list / sample (p50) | RSS B/key: stored, replay's first pass |")
    print("|" + "---|" * (len(columns) + 3))
    for measured in rows:
        cells = [f"{pct(measured[c], 50):.3f} / {pct(measured[c], 99):.3f}" for c in columns]
        ratio = pct(measured["kv_list"], 50) / pct(measured["sample"], 50)
        print(f"| {measured['keys']:,} | " + " | ".join(cells) + f" | {ratio:.0f}x | "
              f"{measured['rss_stored']:.0f}, {measured['rss_replay']:.0f} |")
    print("\nnoise floor (the first row timed again at the end), p50 ms, first - again:")
    for c in columns:
        print(f"  {c}: {pct(rows[0][c], 50):.3f} - {pct(again[c], 50):.3f}")
    print(f"\np50 at {rows[-1]['keys']:,} keys / at {rows[0]['keys']:,} (target for sample <= {TARGET_RATIO}x):")
    for c in columns:
        ratio = pct(rows[-1][c], 50) / pct(rows[0][c], 50)
        verdict = f" (target {'holds' if ratio <= TARGET_RATIO else 'does not hold'})" if c == "sample" else ""
        print(f"  {c}: {ratio:.2f}x{verdict}")


if __name__ == "__main__":
    main()
