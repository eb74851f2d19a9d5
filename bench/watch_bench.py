"""Latency from a prompt's status change to the one waiting for it.

A partition holds N idle prompt keys (verl's replay-buffer tags: is_prompt,
status "running", global_steps), each with one trajectory key. One prompt
at a time turns finished (kv_put of its status); the table gives p50 / p99
of the time until the waiter sees it, for:

- watch: Client.watch(tag_field="status") pushed by the controller;
- drop-in now: ReplayBufferAsync.wait_for_sampleable, which waits on watch();
- drop-in before: replay passes with a 50 ms sleep between idle ones (the
  drop-in until this change);
- verl: kv_list of the partition and a scan of the tags every 2 s
  (verl 0.9.1's poll_interval), with the cost of one kv_list beside it.

Embedded and remote (a controller and one storage unit as `seqflow serve`
processes on 127.0.0.1), at each idle-key count. The floor row is a bare
kv_put of a status tag, which every waiter's latency includes; the
watch row is timed twice (first and last) to show the run's noise.

    .venv/bin/python bench/watch_bench.py [--counts 10000,100000] [--rounds 40] [--verl-rounds 4]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np

import seqflow
from seqflow.compat.verl import ReplayBufferAsync

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partition_count_bench import Serve  # noqa: E402
from run_header import run_header  # noqa: E402

PARTITION = "train"
VERL_POLL = 2.0  # seconds: verl's poll_interval
DROP_IN_SLEEP = 0.05  # seconds: the drop-in's sleep between idle passes before watch()


def fill(client: seqflow.Client, idle: int) -> None:
    """`idle` running prompts "p{i}", each with one trajectory "p{i}_0_0"."""
    for first in range(0, idle, 10_000):
        ids = range(first, min(idle, first + 10_000))
        client.kv_batch_put([f"p{i}" for i in ids], PARTITION,
                            tags=[{"is_prompt": True, "status": "running", "global_steps": 0} for _ in ids])
        client.kv_batch_put([f"p{i}_0_0" for i in ids], PARTITION, tags=[{"reward": 1.0} for _ in ids])


def finish(client: seqflow.Client, prompt: int) -> float:
    """Marks the prompt finished; the time it started."""
    started = time.perf_counter()
    client.kv_put(f"p{prompt}", PARTITION, tag={"status": "finished"})
    return started


def timed(rounds: int, first: int, waiter: Callable[[int], None], period: float, client: seqflow.Client) -> np.ndarray:
    """ms from each finish to `waiter(prompt)` returning in another thread.
    Each finish comes at a random phase of the waiter's polling period (a
    status lands whenever its rollout ends), after the waiter started."""
    phases = np.random.default_rng(0).uniform(0.0, period, rounds)
    latencies = []
    for prompt, phase in zip(range(first, first + rounds), phases):
        seen = []
        ready = threading.Event()

        def wait(prompt: int = prompt) -> None:
            ready.set()
            waiter(prompt)
            seen.append(time.perf_counter())

        thread = threading.Thread(target=wait)
        thread.start()
        ready.wait(30)
        time.sleep(phase)
        started = finish(client, prompt)
        thread.join(60)
        if not seen:
            raise RuntimeError(f"prompt {prompt} was not seen within 60 s")
        latencies.append(seen[0] - started)
    return np.array(latencies) * 1e3


def watch_waiter(client: seqflow.Client) -> Callable[[int], None]:
    changes = client.watch(PARTITION, tag_field="status")

    def waiter(prompt: int) -> None:
        key = f"p{prompt}"
        for change in changes:
            if change.key == key and change.tag.get("status") == "finished":
                return

    return waiter


def drop_in_waiter(client: seqflow.Client) -> Callable[[int], None]:
    buffer = ReplayBufferAsync("async", {}, None, "drop", {}, poll_interval=VERL_POLL, client=client)
    return lambda prompt: buffer.wait_for_sampleable(0, PARTITION, prompt + 1)


def sleeping_waiter(client: seqflow.Client) -> Callable[[int], None]:
    def waiter(prompt: int) -> None:
        while client.replay_pass(PARTITION, 0, 0, step="count").sampleable < prompt + 1:
            time.sleep(DROP_IN_SLEEP)

    return waiter


def verl_waiter(client: seqflow.Client) -> Callable[[int], None]:
    def waiter(prompt: int) -> None:
        key = f"p{prompt}"
        while client.kv_list(PARTITION)[PARTITION][key].get("status") != "finished":
            time.sleep(VERL_POLL)

    return waiter


def kv_list_ms(client: seqflow.Client, times: int = 5) -> float:
    spent = []
    for _ in range(times):
        started = time.perf_counter()
        client.kv_list(PARTITION)
        spent.append(time.perf_counter() - started)
    return float(np.median(spent)) * 1e3


def floor_ms(client: seqflow.Client, rounds: int) -> np.ndarray:
    spent = []
    for _ in range(rounds):
        started = time.perf_counter()
        client.kv_put("floor", "floor", tag={"status": "finished"})
        spent.append(time.perf_counter() - started)
    return np.array(spent) * 1e3


def row(mode: str, idle: int, waiter: str, latencies: np.ndarray, note: str = "") -> str:
    return (f"| {mode} | {idle:,} | {waiter} | {np.percentile(latencies, 50):.2f} | "
            f"{np.percentile(latencies, 99):.2f} | {len(latencies)} | {note} |")


def measure(mode: str, client: seqflow.Client, waiter_client: Callable[[], seqflow.Client], idle: int, rounds: int,
            verl_rounds: int) -> list[str]:
    """The rows of one mode and idle-key count. `waiter_client()`: the client a
    waiter uses (embedded: `client` itself, remote: a connection of its own)."""
    fill(client, idle)
    rows = [row(mode, idle, "floor: one kv_put", floor_ms(client, rounds))]
    prompt = 0
    for name, make, count, period in (
            ("watch", watch_waiter, rounds, 0.05), ("drop-in now (watch)", drop_in_waiter, rounds, 0.05),
            ("drop-in before (50 ms sleep)", sleeping_waiter, rounds, DROP_IN_SLEEP),
            ("verl (2 s poll + kv_list)", verl_waiter, verl_rounds, VERL_POLL),
            ("watch (again)", watch_waiter, rounds, 0.05)):
        waiting = waiter_client()
        try:
            latencies = timed(count, prompt, make(waiting), period, client)
        finally:
            if waiting is not client:
                waiting.close()
        note = f"kv_list {kv_list_ms(client):.1f} ms" if name.startswith("verl") else ""
        rows.append(row(mode, idle, name, latencies, note))
        prompt += count
    client.clear_partition(PARTITION)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--counts", default="10000,100000", help="idle prompt keys of each row")
    parser.add_argument("--rounds", type=int, default=40, help="status changes timed per waiter")
    parser.add_argument("--verl-rounds", type=int, default=4, help="for verl's 2 s poll (each takes ~1 s)")
    args = parser.parse_args(argv)
    print("\n".join(run_header(seqflow)))
    print()
    print("| mode | idle keys | waiter | p50 ms | p99 ms | n | |")
    print("|---|---|---|---|---|---|---|")
    controller = Serve("controller", "--storage-units", "1")
    unit = Serve("storage", "--controller", controller.endpoint)
    embedded = seqflow.Client()
    remote = seqflow.Client.remote(controller.endpoint, timeout=60)
    try:
        for idle in (int(c) for c in args.counts.split(",")):
            for line in measure("embedded", embedded, lambda: embedded, idle, args.rounds, args.verl_rounds):
                print(line, flush=True)
            for line in measure("remote", remote, lambda: seqflow.Client.remote(controller.endpoint, timeout=60),
                                idle, args.rounds, args.verl_rounds):
                print(line, flush=True)
    finally:
        embedded.close()
        remote.close()
        unit.stop()
        controller.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
