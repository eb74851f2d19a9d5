"""Issue 41: a group's completion to its availability in the replay buffer, 64 producers, at stored keys.

Three buffers, each against its own store, one row per stored-key count:

- verl on TQ: verl 0.9.1's own ReplayBufferAsync on the real TransferQueue 0.1.11 (controller and one
  SimpleStorage unit as Ray actors on a local Ray instance), polling every 2 s (verl's default
  poll_interval, which verl's trainer config leaves as is): each poll is one kv_list of every key.
- verl on compat: the same class of verl's on seqflow.compat.install_as_transfer_queue(), joined to a
  `seqflow serve` controller and one unit on 127.0.0.1 (same 2 s poll, kv_list on seqflow).
- drop-in: seqflow.compat.verl.ReplayBufferAsync on the same kind of `seqflow serve` pair: each pass is
  one replay_pass in the controller, and between passes it waits for the controller's pushed change.

Each row's partition first holds running groups in verl's layout (replay_bench.fill: prompt `{uid}` tagged
is_prompt / status / global_steps, GROUP trajectories `{uid}_{s}_0`) up to the row's key count, less one
step's groups, whose prompts are put "running" too. Producers then complete the step's groups at --rate
groups/s: a kv_batch_put of the group's trajectories (with tags), then a kv_put of its prompt's status
"finished"; the completion time is taken when that put returned. 64 producers: --producer-processes
processes of --producer-threads threads (default 4 x 16: the writes are network calls that release the
GIL, so threads in a few processes load the controller as 64 agents would while leaving this 2-core
machine's CPU to the services; seqflow's are spawned processes, TransferQueue's are Ray actors, as
verl's agent-loop workers are).

The consumer (this process, or TransferQueue's worker process) asks its buffer for one group more than
it has seen (wait_for_sampleable(step, "train", unsampled + 1)) and takes the moment the call returns as
the first time each newly reported group was available; when a step's groups are there, sample() takes
them (prompt keys cleared) and their trajectories are cleared (what verl's trainer does after a step).
Latency = first reported - completed, p50 / p99 over every group of the row. A producer thread among 16
in its process may take the completion time late (the buffer can report a group before the put returned
to its producer: the lowest latency is printed); measured from the moment the status put was sent
instead, the drop-in's p99 is an upper bound (printed beside its target). Every completed group must be
reported and sampled exactly once (counted; a FAIL line says otherwise).

Controller CPU per step: utime + stime of the controller's process (/proc/PID/stat; TransferQueue: its
controller actor's process) from the producers' start to the last step's sample, divided by the steps:
it includes serving the producers' writes, the same for every buffer. Listing bytes per step: the
pickled size of what the buffer's listing calls returned (not wire frames: no side counts those), per
step: verl: its kv_list calls x the pickled size of one kv_list of the partition (taken after the steps,
so that the timed loop does not pickle a million keys per poll); drop-in: the pickled uid lists, keys
and tags of every replay_pass answer it received (its waits on the controller's push carry no listing).

TransferQueue runs in its own venv (tools/reference_peer.py, as in bench/transferqueue_compare.py): this
file as a worker process there, verl's package added at the end of its sys.path. Its steps are capped at
rows of --tq-cap-keys keys and more (--tq-capped-steps); the table says so.

The first row is run again at the end: its two readings are the run's noise floor. Targets (PASS/FAIL):
the drop-in's p99 <= 5 ms at every row; controller CPU per step within 1.2x from the smallest to the
largest row (the drop-in's; the others' ratios printed beside).

    .venv/bin/python bench/replay_latency_bench.py [--quick] [--keys 10000,100000,1000000] [--steps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tools"))
from replay_bench import GROUP, PUT_CHUNK, fill  # noqa: E402

PARTITION = "train"
VERL_POLL = 2.0  # seconds: verl's poll_interval default
P99_TARGET_MS = 5.0
CPU_TARGET_RATIO = 1.2
START_LEAD = 1.0  # seconds between the producers' start call and their first scheduled completion
ROW_TIMEOUT = 900.0
STALL_TIMEOUT = 120.0  # seconds the buffer has, after the last completion, to report and sample the rest
VERL_ON_TQ, VERL_ON_COMPAT, DROP_IN = "verl on TQ", "verl on compat", "drop-in"
COLUMNS = (VERL_ON_TQ, VERL_ON_COMPAT, DROP_IN)
TQ_WORKER_FLAG = "--tq-worker"


def progress(message: str) -> None:
    """To stderr; in TransferQueue's worker to stdout, for the parent to show (the worker's stderr carries Ray's
    and TransferQueue's logs to a file)."""
    line = f"[{time.strftime('%H:%M:%S')}] {message}"
    if TQ_WORKER_FLAG in sys.argv:
        print(f"PROGRESS {line}", flush=True)
    else:
        print(line, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Producers and the consumer: the same code on every side (api: a seqflow client or the transfer_queue module)


def schedule(steps: int, groups_per_step: int, rate: float) -> list[tuple[str, int, float]]:
    """(uid, step, seconds after the start) of every group the producers complete, evenly at `rate`."""
    return [(f"q{step:03d}n{j:05d}", step, (step * groups_per_step + j) / rate)
            for step in range(steps) for j in range(groups_per_step)]


def put_running(api, groups: list[tuple[str, int, float]]) -> None:
    """The groups' prompt keys, "running", as verl puts them when it dispatches the prompts."""
    for first in range(0, len(groups), PUT_CHUNK):
        chunk = groups[first:first + PUT_CHUNK]
        api.kv_batch_put([uid for uid, _, _ in chunk], PARTITION,
                         tags=[{"is_prompt": True, "status": "running", "global_steps": step} for _, step, _ in chunk])


def complete(api, uid: str, step: int) -> float:
    """A group's trajectories, then its prompt's status "finished"; when the status put was sent."""
    api.kv_batch_put([f"{uid}_{s}_0" for s in range(GROUP)], PARTITION,
                     tags=[{"reward": float(s % 2)} for s in range(GROUP)])
    sent = time.monotonic()
    api.kv_put(uid, PARTITION, tag={"is_prompt": True, "status": "finished", "global_steps": step})
    return sent


def produce(apis: list, groups: list[tuple[str, int, float]], start: float) -> list[tuple[str, float, float]]:
    """One thread per api, each completing every len(apis)-th group at its scheduled time (monotonic clock,
    shared by the processes of one host); (uid, status put sent, completed: the put returned) of each."""
    completed: list[tuple[str, float, float]] = []
    failures: list[BaseException] = []

    def run(api, mine) -> None:
        try:
            for uid, step, offset in mine:
                pause = start + offset - time.monotonic()
                if pause > 0:
                    time.sleep(pause)  # pacing the producer, not synchronizing with anyone
                sent = complete(api, uid, step)
                completed.append((uid, sent, time.monotonic()))
        except BaseException as error:  # noqa: BLE001 - raised in the caller's thread
            failures.append(error)

    threads = [threading.Thread(target=run, args=(api, groups[i::len(apis)])) for i, api in enumerate(apis)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return completed


def consume(buffer, clear, steps: int, groups_per_step: int, seen: dict[str, float], sampled: list[str]) -> None:
    """Asks `buffer` for one group more than it reported until each step's groups are there, then samples
    them and clears their trajectories (clear(keys)); fills seen {uid: first reported (monotonic)} and
    sampled (uids), which the caller reads even if this never returns."""
    reported_again: set[str] = set()  # sampled groups a buffer still reports sampleable: asked past, not counted
    for step in range(steps):
        while len(seen) - len(sampled) < groups_per_step:
            uids, _ = buffer.wait_for_sampleable(step, PARTITION, len(seen) - len(sampled) + len(reported_again) + 1)
            now = time.monotonic()
            for uid in uids:
                seen.setdefault(uid, now)
            reported_again = set(uids).intersection(sampled)
        batch, _ = buffer.sample(step, PARTITION, groups_per_step)
        sampled += sorted({key.split("_")[0] for key in batch.keys})
        clear(list(batch.keys))
        progress(f"  step {step + 1} of {steps} sampled ({len(seen):,} groups reported)")


def measure(buffer, api, counted, controller_pid: int, run_producers, groups, steps: int,
            groups_per_step: int) -> dict:
    """Runs the producers (run_producers(start) -> [(uid, sent, completed)]) and the consumer at once; the row's
    latencies, controller CPU per step and what came of each completed group. A buffer that has not
    sampled every group STALL_TIMEOUT after the last completion is left waiting (its thread ends with the
    services) and the row says where the groups it never reported stand in the store (api.kv_list)."""
    buffer.get_sampleable_count(0, PARTITION)  # the first look reads every key once: before the clock starts
    counted.reset()  # the listing calls counted: the steps' only
    cpu_before = cpu_seconds(controller_pid)
    seen: dict[str, float] = {}
    sampled: list[str] = []
    failures: list[BaseException] = []

    def consumer() -> None:
        try:
            consume(buffer, lambda keys: api.kv_clear(keys, PARTITION), steps, groups_per_step, seen, sampled)
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)

    thread = threading.Thread(target=consumer, daemon=True)
    thread.start()
    completions = run_producers(time.monotonic() + START_LEAD)
    thread.join(STALL_TIMEOUT)
    if failures:
        raise RuntimeError(f"the consumer failed: {failures[0]!r}")
    cpu = (cpu_seconds(controller_pid) - cpu_before) / steps
    seen, sampled = dict(seen), list(sampled)
    completed = {uid: (sent, done) for uid, sent, done in completions}
    if len(completed) != len(groups):
        raise RuntimeError(f"{len(completed)} groups completed of {len(groups)}")
    reported = [(seen[uid], sent, done) for uid, (sent, done) in completed.items() if uid in seen]
    row = {"latencies_ms": [(first - done) * 1e3 for first, _, done in reported],
           "from_send_ms": [(first - sent) * 1e3 for first, sent, _ in reported], "cpu_per_step": cpu, "steps": steps,
           "exactly_once": {"never reported": len(completed.keys() - seen.keys()),
                            "reported, never completed": len(seen.keys() - completed.keys()),
                            "sampled twice": len(sampled) - len(set(sampled)),
                            "never sampled": len(completed.keys() - set(sampled))}}
    if thread.is_alive():
        listing = api.kv_list(PARTITION).get(PARTITION, {})
        statuses = Counter(f"status {listing[uid]['status']}" if "status" in listing.get(uid, {}) else
                           f"listed with tag {listing[uid]}" if uid in listing else "not listed"
                           for uid in completed.keys() - seen.keys())
        row["stalled"] = (f"still waiting {STALL_TIMEOUT:.0f} s after the last completion, {len(sampled):,} groups "
                          f"sampled; the never reported groups' prompts in kv_list: {dict(statuses)}")
    return row


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all its threads)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def filler_keys(keys: int, groups_per_step: int) -> int:
    return max(0, keys - groups_per_step * (GROUP + 1))


class CountedListing:
    """The transfer_queue module as verl's buffer sees it (its module global `tq`), counting kv_list calls."""

    def __init__(self, module):
        self.module = module
        self.reset()

    def reset(self) -> None:
        self.calls = 0

    def __getattr__(self, name: str):
        return getattr(self.module, name)

    def kv_list(self, *args, **kwargs):
        self.calls += 1
        return self.module.kv_list(*args, **kwargs)


class CountedReplies:
    """Wraps a client's replay_pass: counts its answers and the pickled size of what they list."""

    def __init__(self, client):
        self.replay_pass = client.replay_pass
        self.reset()
        client.replay_pass = self.counting

    def reset(self) -> None:
        self.calls = 0
        self.bytes = 0

    def counting(self, *args, **kwargs):
        answer = self.replay_pass(*args, **kwargs)
        self.calls += 1
        self.bytes += len(pickle.dumps([list(answer.sampleable_uids), list(answer.selected_uids), list(answer.keys),
                                        list(answer.tags)], protocol=pickle.HIGHEST_PROTOCOL))
        return answer


def verl_buffer(verl_module, counted: CountedListing):
    verl_module.tq = counted
    return verl_module.ReplayBufferAsync("async", {}, None, "drop", {}, poll_interval=VERL_POLL)


def listing_bytes(module) -> int:
    return len(pickle.dumps(module.kv_list(PARTITION), protocol=pickle.HIGHEST_PROTOCOL))


def verl_row(measured: dict, counted: CountedListing, module) -> dict:
    return dict(measured, listings=counted.calls,
                bytes_per_step=counted.calls * listing_bytes(module) / measured["steps"])


# --------------------------------------------------------------------------
# seqflow's two columns: `seqflow serve` processes, producers as spawned processes


def seqflow_producer(endpoint: str, groups, start: float, threads: int) -> list[tuple[str, float, float]]:
    import seqflow

    clients = [seqflow.Client.remote(endpoint, timeout=60) for _ in range(threads)]
    try:
        return produce(clients, groups, start)
    finally:
        for client in clients:
            client.close()


def seqflow_row(column: str, keys: int, args, pool: ProcessPoolExecutor) -> dict:
    import seqflow
    from partition_count_bench import Serve

    controller = Serve("controller", "--storage-units", "1")
    unit = Serve("storage", "--controller", controller.endpoint)
    client = seqflow.Client.remote(controller.endpoint, timeout=120)
    try:
        groups = schedule(args.steps, args.groups_per_step, args.rate)
        fill(client, filler_keys(keys, args.groups_per_step), finished_groups=0)
        put_running(client, groups)
        processes = args.producer_processes

        def run_producers(start: float) -> list[tuple[str, float, float]]:
            futures = [pool.submit(seqflow_producer, controller.endpoint, groups[i::processes], start,
                                   args.producer_threads) for i in range(processes)]
            return [done for future in futures for done in future.result(ROW_TIMEOUT)]

        if column == DROP_IN:
            from seqflow.compat.verl import ReplayBufferAsync

            buffer = ReplayBufferAsync("async", {}, None, "drop", {}, poll_interval=VERL_POLL, client=client)
            replies = CountedReplies(client)
            measured = measure(buffer, client, replies, controller.process.pid, run_producers, groups, args.steps,
                               args.groups_per_step)
            return dict(measured, listings=replies.calls, bytes_per_step=replies.bytes / args.steps)
        return verl_on_compat_row(controller.endpoint, controller.process.pid, run_producers, groups, args)
    finally:
        client.close()
        unit.stop()
        controller.stop()


def verl_on_compat_row(endpoint: str, controller_pid: int, run_producers, groups, args) -> dict:
    import seqflow.compat
    from seqflow.compat.transfer_queue import _system

    seqflow.compat.install_as_transfer_queue()  # before verl's module imports transfer_queue
    import transfer_queue
    from verl.trainer.ppo.v1 import replay_buffer

    os.environ[_system.JOIN_ENV] = json.dumps({"address": endpoint, "polling_mode": False, "metrics_endpoint": None})
    transfer_queue.init()
    try:
        counted = CountedListing(transfer_queue)
        measured = measure(verl_buffer(replay_buffer, counted), transfer_queue, counted, controller_pid,
                           run_producers, groups, args.steps, args.groups_per_step)
        return verl_row(measured, counted, transfer_queue)
    finally:
        transfer_queue.close()  # a joined system: the services stay, to be stopped by the caller
        os.environ.pop(_system.JOIN_ENV, None)


# --------------------------------------------------------------------------
# TransferQueue's column: this file in TransferQueue's venv, one Ray instance for every row


def tq_row(keys: int, args) -> dict:
    """One row in a TransferQueue worker of its own (a Ray instance each: a row whose buffer stalled
    leaves nothing behind for the next); the row, or {"error": why}."""
    import reference_peer
    from transferqueue_compare import last_line

    try:
        python = reference_peer.transferqueue_python()
    except (reference_peer.ReferenceUnavailable, OSError) as error:
        return {"error": f"TransferQueue not available: {error}"}
    command = [python, __file__, TQ_WORKER_FLAG, f"--keys={keys}"] + [
        f"--{name.replace('_', '-')}={getattr(args, name)}" for name in (
            "steps", "groups_per_step", "rate", "producer_processes", "producer_threads", "tq_cap_keys",
            "tq_capped_steps")]
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", PYTHONWARNINGS="ignore")
    log_path = Path(reference_peer.CACHE_DIR) / "tq-replay-latency.log"
    rows = []
    with open(log_path, "w") as log:
        worker = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        for line in worker.stdout:  # the worker's own deadlines end it; its row and progress as they come
            if line.startswith("ROW "):
                rows.append(json.loads(line[4:]))
            elif line.startswith("PROGRESS "):
                print(line[9:], end="", file=sys.stderr, flush=True)
        worker.wait()
    if worker.returncode != 0 or len(rows) != 1:
        return {"error": f"the TransferQueue worker exited {worker.returncode}: {last_line(log_path)}"}
    return rows[0]


def tq_worker(keys: int, args) -> None:
    """In TransferQueue's venv: a local Ray instance, TransferQueue in it, the row; prints "ROW {json}"."""
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    sys.path.append(str(Path(sys.argv[0]).resolve().parents[1] / ".venv" / "lib" /
                        f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"))
    from verl.trainer.ppo.v1 import replay_buffer  # verl's, on TransferQueue's own transfer_queue

    assert replay_buffer.tq is tq, "verl must run on the real TransferQueue here"

    class Producer:
        """One Ray actor: joins the running TransferQueue, completes its groups in threads."""

        def __init__(self):
            import transfer_queue

            transfer_queue.init()
            self.tq = transfer_queue

        def run(self, groups, start: float, threads: int) -> list[tuple[str, float, float]]:
            return produce([self.tq] * threads, groups, start)

    ray.init(address="local", num_cpus=8, include_dashboard=False, object_store_memory=256 << 20, log_to_driver=False)
    try:
        steps = args.tq_capped_steps if keys >= args.tq_cap_keys else args.steps
        tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
        try:
            controller_pid = ray.get(tq.interface._TQ_CONTROLLER.__ray_call__.remote(
                lambda _actor: __import__("os").getpid()))
            groups = schedule(steps, args.groups_per_step, args.rate)
            fill(tq, filler_keys(keys, args.groups_per_step), finished_groups=0)
            put_running(tq, groups)
            progress(f"verl on TQ, {keys:,} keys")
            producers = [ray.remote(num_cpus=1)(Producer).remote() for _ in range(args.producer_processes)]
            ray.get([p.__ray_ready__.remote() for p in producers], timeout=ROW_TIMEOUT)

            def run_producers(start: float) -> list[tuple[str, float, float]]:
                done = ray.get([p.run.remote(groups[i::len(producers)], start, args.producer_threads)
                                for i, p in enumerate(producers)], timeout=ROW_TIMEOUT)
                return [completed for part in done for completed in part]

            counted = CountedListing(tq)
            measured = measure(verl_buffer(replay_buffer, counted), tq, counted, controller_pid, run_producers,
                               groups, steps, args.groups_per_step)
            print("ROW " + json.dumps(dict(verl_row(measured, counted, tq), keys=keys, version=tq.__version__)),
                  flush=True)
        finally:
            tq.close()
    finally:
        ray.shutdown()  # ends the producers, and a stalled consumer's calls with it


# --------------------------------------------------------------------------
# The run and the table


def cells(row: dict | None) -> list[str]:
    if row is None or "error" in row:
        return ["-", "-", "-", "-"]
    latencies = np.array(row["latencies_ms"])
    capped = f" ({row['steps']} step)" if row.get("capped") else ""
    capped += " (stalled: see below)" if "stalled" in row else ""
    return [f"{np.percentile(latencies, 50):.1f} / {np.percentile(latencies, 99):.1f}{capped}",
            f"{row['cpu_per_step'] * 1e3:.0f}", f"{row['bytes_per_step'] / 1e6:.2f}", f"{row['listings']}"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 10k and 100k keys, 2 steps of 200 groups (about 2 minutes)")
    parser.add_argument("--keys", default=None, help="stored keys of each row (default 10000,100000,1000000)")
    parser.add_argument("--steps", type=int, default=None, help="measured steps per row (default 3; quick 2)")
    parser.add_argument("--groups-per-step", type=int, default=None, help="default 1000; quick 200")
    parser.add_argument("--rate", type=float, default=None, help="groups completed per second (default 250)")
    parser.add_argument("--producer-processes", type=int, default=4)
    parser.add_argument("--producer-threads", type=int, default=16)
    parser.add_argument("--columns", default=",".join(COLUMNS), help=f"of: {', '.join(COLUMNS)}")
    parser.add_argument("--tq-cap-keys", type=int, default=1_000_000, help="TransferQueue rows this large and more ...")
    parser.add_argument("--tq-capped-steps", type=int, default=1, help="... run this many steps")
    parser.add_argument("--tq-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    quick = args.quick
    args.keys = args.keys or ("10000,100000" if quick else "10000,100000,1000000")
    args.steps = args.steps or (2 if quick else 3)
    args.groups_per_step = args.groups_per_step or (200 if quick else 1000)
    args.rate = args.rate or 250.0
    sizes = [int(k) for k in args.keys.split(",")]
    columns = [c.strip() for c in args.columns.split(",")]
    if any(c not in COLUMNS for c in columns) or min(sizes) < 0 or args.steps < 1 or args.groups_per_step < 1:
        parser.error(f"--columns must name some of {COLUMNS}; --keys, --steps and --groups-per-step positive")
    if args.tq_worker:
        tq_worker(sizes[0], args)
        return 0

    import seqflow
    from run_header import run_header

    started = time.perf_counter()
    print("\n".join(run_header(seqflow)))
    producers = args.producer_processes * args.producer_threads
    print(f"\n{producers} producers ({args.producer_processes} processes x {args.producer_threads} threads), "
          f"{args.steps} steps of {args.groups_per_step:,} groups of {GROUP} trajectories per row, "
          f"completed at {args.rate:.0f} groups/s; verl polls every {VERL_POLL:.0f} s (its default)\n", flush=True)
    runs = sizes + sizes[:1]  # the first row again at the end: the noise floor
    results: dict[str, list] = {}
    if VERL_ON_TQ in columns:
        results[VERL_ON_TQ] = []
        for keys in runs:
            progress(f"{VERL_ON_TQ}, {keys:,} keys: a TransferQueue worker process")
            row = tq_row(keys, args)
            results[VERL_ON_TQ].append(dict(row, capped=row.get("steps", args.steps) < args.steps))
            if "error" in row:
                print(f"verl on TQ, {keys:,} keys: {row['error']}")
        versions = {row["version"] for row in results[VERL_ON_TQ] if "version" in row}
        if versions:
            print(f"TransferQueue {', '.join(versions)}: controller and 1 SimpleStorage unit as Ray actors; "
                  f"producers: {args.producer_processes} Ray actors; one worker process (and Ray instance) per row")
    with ProcessPoolExecutor(args.producer_processes, mp_context=get_context("spawn")) as pool:
        for column in (VERL_ON_COMPAT, DROP_IN):
            if column in columns:
                results[column] = []
                for keys in runs:
                    progress(f"{column}, {keys:,} keys")
                    results[column].append(seqflow_row(column, keys, args, pool))
                    if "stalled" in results[column][-1]:
                        break  # its consumer may still be in the buffer's loop
                results[column] += [None] * (len(runs) - len(results[column]))

    labels = [f"{k:,}" for k in sizes] + [f"{sizes[0]:,} (again: noise)"]
    shown = [c for c in COLUMNS if c in results]
    print("\nlatency: ms from a group's completion (its status put returned) to the buffer first reporting it; "
          "CPU: controller ms per step; MB: listing bytes per step (pickled); calls: listing calls in the row\n")
    print("| stored keys | " + " | ".join(f"{c}: p50 / p99 ms | CPU ms/step | MB/step | calls" for c in shown) + " |")
    print("|---|" + "---:|---:|---:|---:|" * len(shown))
    for i, label in enumerate(labels):
        print(f"| {label} | " + " | ".join(" | ".join(cells(results[c][i])) for c in shown) + " |")
    earliest = {c: min(min(row["latencies_ms"]) for row in results[c] if row and row.get("latencies_ms"))
                for c in shown if any(row and row.get("latencies_ms") for row in results[c])}
    print("lowest latency, ms (below 0: the buffer reported the group before the status put returned to its "
          "producer): " + ", ".join(f"{c} {ms:.2f}" for c, ms in earliest.items()))
    for column in shown:
        for label, row in zip(labels, results[column]):
            wrong = {what: count for what, count in (row or {}).get("exactly_once", {}).items() if count}
            if wrong:
                print(f"FAIL {column}, {label} keys: not every completed group reported and sampled exactly once: "
                      + ", ".join(f"{what} {count}" for what, count in wrong.items()))
            if row and "stalled" in row:
                print(f"  {column}, {label} keys: {row['stalled']}")
    print()
    if DROP_IN in results:
        worst = max(np.percentile(row["latencies_ms"], 99) for row in results[DROP_IN][:len(sizes)])
        bound = max(np.percentile(row["from_send_ms"], 99) for row in results[DROP_IN][:len(sizes)])
        print(f"{'PASS' if worst <= P99_TARGET_MS else 'FAIL'} drop-in p99 <= {P99_TARGET_MS:.0f} ms at every row: "
              f"highest {worst:.2f} ms (from the status put's send instead, an upper bound: {bound:.2f} ms)")
    for column in shown:
        rows = results[column]
        if rows[0] is None or rows[len(sizes) - 1] is None or "error" in rows[0] or "error" in rows[len(sizes) - 1]:
            print(f"SKIP {column} CPU ratio: a row is missing")
            continue
        ratio = rows[len(sizes) - 1]["cpu_per_step"] / rows[0]["cpu_per_step"]
        again = rows[-1]["cpu_per_step"] / rows[0]["cpu_per_step"] if rows[-1] and "error" not in rows[-1] else None
        noise = f"; noise: the first row again / first {again:.2f}x" if again else ""
        verdict = ("PASS" if ratio <= CPU_TARGET_RATIO else "FAIL") if column == DROP_IN else "info"
        print(f"{verdict} {column} controller CPU per step, {sizes[-1]:,} / {sizes[0]:,} keys: {ratio:.2f}x "
              f"(target <= {CPU_TARGET_RATIO}x for the drop-in){noise}")
    load = os.getloadavg()
    print(f"\ntotal {time.perf_counter() - started:.0f} s; load average at the end {load[0]:.1f} {load[1]:.1f} "
          f"{load[2]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
