#!/usr/bin/env python3
"""TransferQueue side by side: put / get throughput of seqflow's remote mode
and of TransferQueue's SimpleStorage, on the same shapes in the same run.

    .venv/bin/python bench/transferqueue_compare.py [--quick] [--reps N]

Shapes: TransferQueue's perf-test shape, 1,024 samples x 9 fields x 8,192
float32 (288 MiB), and the larger one of bench/remote_bench.cc, 4,096 x 9 x
8,192 (1.125 GiB; not with --quick); 1, 2 and 4 storage units each.

Both sides run the same Python calls on the same TensorDict (torch.randn):
  put  client.put(data, partition_id=P)                      (insert + write)
  get  client.get_meta(fields, n, P, mode="fetch", task_name=T)
       + client.get_data(meta)
then an untimed clear_partition. For each unit count both clusters run at
once and the two sides take turns, repetition by repetition, so that a
burst of load on a shared machine hits both; an untimed put / get of 16
samples warms each side's sockets up first. The first repetition's data is
checked against what was put. Each row shows the medians of the repetitions
(--reps; 3, quick 5) and, since a shared machine's load comes in bursts,
also the ratio of the best runs.

seqflow: `seqflow serve controller` and N `seqflow serve storage` processes
on 127.0.0.1, the client in this process (seqflow.init with
controller.address): the default client, which moves large data to and from
same-host units through memory (local_copy), and beside it a client with
local_copy off, over loopback TCP (its column; the verdict is the default
client's). TransferQueue: transfer_queue.init() with its
controller and N SimpleStorageUnit Ray actors on a local Ray instance (kept
on 127.0.0.1), the client in the driver: a worker process running this file
in TransferQueue's own virtual environment, made on first use by
tools/reference_peer.py under $SEQFLOW_REFERENCE_CACHE/tq-venv (default
~/.cache/seqflow-reference) with `pip install transferqueue==0.1.11
torch==2.13.0` (and pytest), so that nothing TransferQueue pulls in touches
this environment. If TransferQueue cannot be installed or
started, a line says why and seqflow's numbers are printed alone.

Target: seqflow / TransferQueue >= 3 in every row, put and get. Timings on a
shared machine are noisy; compare the ratios of one run. The exit status is
0 whatever the targets say (2 on bad arguments).
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Client, Listener
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import reference_peer  # noqa: E402  (tools/ is no package)

FIELDS = 9
SEQ = 8_192
SHAPES = ((1_024, "1024x9x8192"), (4_096, "4096x9x8192"))
UNITS = (1, 2, 4)
PARTITION = "bench"
TASK = "bench"
WARM_UP_SAMPLES = 16
RATIO_TARGET = 3.0
GB = 1e9
LOOPBACK = "tcp://127.0.0.1:0"
CACHE_DIR = Path(reference_peer.CACHE_DIR)
TQ_VENV = Path(reference_peer.VENV_DIR)
SERVE_TIMEOUT = 30.0
WORKER_START_TIMEOUT = 180.0  # Ray's start and the batches, on a busy 2-core machine
WORKER_CALL_TIMEOUT = 300.0  # tq.init starts one Ray actor process per unit
WORKER_STOP_TIMEOUT = 60.0


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def shapes_of(quick: bool):
    return SHAPES[:1] if quick else SHAPES


def payload_bytes(samples: int) -> int:
    return samples * FIELDS * SEQ * 4


# --------------------------------------------------------------------------
# One repetition, run by both sides (TransferQueue's in its own venv)


def make_batches(quick: bool) -> dict:
    """{samples: TensorDict of FIELDS float32 columns of samples x SEQ}."""
    import torch
    from tensordict import TensorDict

    batches = {}
    for samples, _ in shapes_of(quick):
        generator = torch.Generator().manual_seed(samples)
        batches[samples] = TensorDict(
            {f"field_{f}": torch.randn(samples, SEQ, generator=generator) for f in range(FIELDS)},
            batch_size=[samples])
    return batches


def dense(tensor):
    """TransferQueue's get_data packs every field as a jagged nested tensor."""
    return tensor.values().view(tensor.size(0), -1) if tensor.is_nested else tensor


def put_get(client, data, check: bool) -> tuple[float, float]:
    """Seconds of one put and one get_meta + get_data of `data`; the partition is cleared after."""
    fields = list(data.keys())
    samples = data.batch_size[0]
    start = time.perf_counter()
    put_meta = client.put(data, partition_id=PARTITION)
    put_seconds = time.perf_counter() - start
    start = time.perf_counter()
    meta = client.get_meta(data_fields=fields, batch_size=samples, partition_id=PARTITION, mode="fetch",
                           task_name=TASK)
    out = client.get_data(meta)
    get_seconds = time.perf_counter() - start
    if check:
        import torch

        # A fetch returns samples in global-index order, which is not the put's order once
        # TransferQueue reuses released indexes: compare row by global index.
        row_of = {int(gi): row for row, gi in enumerate(put_meta.global_indexes)}
        rows = [row_of.get(int(gi), -1) for gi in meta.global_indexes]
        last = fields[-1]
        if sorted(rows) != list(range(samples)) or not torch.equal(dense(out[last]), data[last][torch.tensor(rows)]):
            raise RuntimeError(f"get returned other data than was put ({meta.size} of {samples} samples)")
    del out, meta  # freed before the next put, as a consumer would
    client.clear_partition(PARTITION)
    return put_seconds, get_seconds


# --------------------------------------------------------------------------
# seqflow: `seqflow serve` processes, the client here


class ServeProcess:
    """`seqflow serve ROLE ...`, serving once constructed (its first stdout line names the endpoint)."""

    def __init__(self, role: str, *args: str):
        command = Path(sys.executable).parent / "seqflow"
        self.log = tempfile.TemporaryFile()  # its stop messages would interleave with the progress lines
        self.process = subprocess.Popen([str(command) if command.exists() else shutil.which("seqflow") or "seqflow",
                                         "serve", role, *args], stdout=subprocess.PIPE, stderr=self.log)
        ready, _, _ = select.select([self.process.stdout], [], [], SERVE_TIMEOUT)
        words = self.process.stdout.readline().decode().split() if ready else []
        if words[:4] != ["seqflow", role, "serving", "on"]:
            self.process.kill()
            self.process.wait()
            self.log.seek(0)
            why = self.log.read().decode(errors="replace").strip()[-400:]
            self.stop()
            raise RuntimeError(f"seqflow serve {role} did not start: {' '.join(words)!r}; stderr: {why}")
        self.endpoint = words[4]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(SERVE_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()
        self.log.close()


class SeqflowSide:
    """A `seqflow serve` controller and `units` storage units, the default client connected to them."""

    def __init__(self, seqflow, units: int, batches: dict):
        self.seqflow = seqflow
        self.batches = batches
        self.services = [ServeProcess("controller", "--bind", LOOPBACK, "--storage-units", str(units))]
        try:
            self.services += [ServeProcess("storage", "--controller", self.services[0].endpoint, "--bind", LOOPBACK)
                              for _ in range(units)]
            self.client = seqflow.init({"controller": {"address": self.services[0].endpoint}, "timeout": 120})
            self.tcp_client = seqflow.Client.remote(self.services[0].endpoint, timeout=120, local_copy=False)
        except BaseException:
            self.stop()
            raise

    def put_get(self, samples: int, rows: int, check: bool) -> tuple[float, float]:
        return put_get(self.client, self.batches[samples][:rows], check)

    def over_tcp(self) -> "SeqflowOverTcp":
        return SeqflowOverTcp(self)

    def stop(self) -> None:
        if hasattr(self, "tcp_client"):
            self.tcp_client.close()
        self.seqflow.close()
        for service in reversed(self.services):
            service.stop()


class SeqflowOverTcp:
    """The same services through a client with local_copy off: every byte over loopback TCP."""

    def __init__(self, side: SeqflowSide):
        self.side = side

    def put_get(self, samples: int, rows: int, check: bool) -> tuple[float, float]:
        return put_get(self.side.tcp_client, self.side.batches[samples][:rows], check)


# --------------------------------------------------------------------------
# TransferQueue: its own venv, a worker process with a local Ray instance


class TransferQueueError(RuntimeError):
    pass


def transferqueue_python() -> str:
    """The TransferQueue venv's python, the venv made first if needed."""
    try:
        return reference_peer.transferqueue_python()
    except (reference_peer.ReferenceUnavailable, OSError) as error:
        raise TransferQueueError(str(error)) from None


def last_line(path: Path) -> str:
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


class TransferQueueSide:
    """This file as a worker process in TransferQueue's venv, driven call by call:
    start(units), put_get(...), stop_units(); close() ends it."""

    def __init__(self, quick: bool):
        python = transferqueue_python()
        self.scratch = tempfile.TemporaryDirectory(prefix="tq-compare-")
        self.log_path = CACHE_DIR / "tq-run.log"
        address = os.path.join(self.scratch.name, "worker.sock")
        authkey = os.urandom(16).hex()
        # Ray binds its services, and TransferQueue its ZeroMQ sockets, to Ray's node address:
        # this makes that 127.0.0.1. No usage-stats reporting from a benchmark.
        env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0",
                   TQ_COMPARE_AUTHKEY=authkey)
        command = [python, __file__, "--transferqueue-worker", address] + (["--quick"] if quick else [])
        progress(f"starting TransferQueue in {TQ_VENV} (log {self.log_path})")
        self.log = open(self.log_path, "w")
        self.worker = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                       start_new_session=True)
        self.connection = None
        try:
            self.connection = self._connect(address, authkey.encode())
            self.version = self._reply(WORKER_START_TIMEOUT)
        except BaseException:
            self.close()
            raise

    def _connect(self, address: str, authkey: bytes):
        deadline = time.monotonic() + WORKER_START_TIMEOUT
        while True:
            try:
                return Client(address, family="AF_UNIX", authkey=authkey)
            except (FileNotFoundError, ConnectionRefusedError):
                if self.worker.poll() is not None or time.monotonic() > deadline:
                    raise TransferQueueError(self._gone("did not start")) from None
                time.sleep(0.2)

    def _reply(self, timeout: float):
        try:
            if self.connection.poll(timeout):
                status, value = self.connection.recv()
                if status == "error":
                    raise TransferQueueError(value)
                return value
        except (EOFError, OSError):
            pass
        raise TransferQueueError(self._gone(f"gave no answer within {timeout:.0f} s"))

    def _gone(self, what: str) -> str:
        if self.worker.poll() is not None:
            what = f"exited {self.worker.returncode}"
        self.log.flush()
        return f"the worker {what}: {last_line(self.log_path)} (log {self.log_path})"

    @property
    def alive(self) -> bool:
        return self.worker.poll() is None

    def call(self, *command):
        try:
            self.connection.send(command)
        except OSError as error:
            raise TransferQueueError(self._gone(f"took no call ({error})")) from None
        return self._reply(WORKER_CALL_TIMEOUT)

    def start(self, units: int) -> None:
        self.call("start", units)

    def put_get(self, samples: int, rows: int, check: bool) -> tuple[float, float]:
        return tuple(self.call("put_get", samples, rows, check))

    def stop_units(self) -> None:
        self.call("stop")

    def close(self) -> None:
        if self.connection is not None:
            try:
                self.connection.send(None)
            except OSError:
                pass
            self.connection.close()
        try:
            self.worker.wait(WORKER_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:  # the worker and the Ray processes it started
            os.killpg(self.worker.pid, signal.SIGKILL)
            self.worker.wait()
        self.log.close()
        self.scratch.cleanup()


def transferqueue_worker(address: str, quick: bool) -> None:
    """Runs in TransferQueue's venv: a local Ray instance, then the parent's calls until None."""
    with Listener(address, family="AF_UNIX", authkey=os.environ["TQ_COMPARE_AUTHKEY"].encode()) as listener:
        with listener.accept() as connection:
            import ray
            import transfer_queue as tq
            from omegaconf import OmegaConf

            # Logical CPUs: TransferQueue's controller and each storage unit reserve one (5 with 4 units).
            ray.init(num_cpus=8, include_dashboard=False, object_store_memory=256 << 20, log_to_driver=False)
            try:
                batches = make_batches(quick)
                connection.send(("ok", tq.__version__))
                while (command := connection.recv()) is not None:
                    op, *args = command
                    try:
                        if op == "start":
                            conf = {"backend": {"SimpleStorage": {"num_data_storage_units": args[0]}}}
                            tq.init(OmegaConf.create(conf))
                            reply = None
                        elif op == "stop":
                            tq.close()
                            reply = None
                        else:
                            samples, rows, check = args
                            reply = put_get(tq.get_client(), batches[samples][:rows], check)
                        connection.send(("ok", reply))
                    except Exception as error:  # noqa: BLE001 - the parent reports it
                        connection.send(("error", f"{op}: {type(error).__name__}: {error}"))
            finally:
                tq.close()
                ray.shutdown()


# --------------------------------------------------------------------------
# The run and the report


def run(seqflow, quick: bool, reps: int) -> tuple[list[dict], list[dict], list[str]]:
    """seqflow's rows, TransferQueue's rows, and lines about TransferQueue."""
    try:
        transferqueue = TransferQueueSide(quick)
        notes = [f"TransferQueue {transferqueue.version} (SimpleStorage: controller and storage units as Ray "
                 f"actors on a local Ray instance, client in the driver), venv {TQ_VENV}"]
    except TransferQueueError as error:
        transferqueue, notes = None, [f"TransferQueue not measured: {error}"]
    batches = make_batches(quick)
    ours, theirs = [], []
    try:
        for units in UNITS:
            seqflow_side = SeqflowSide(seqflow, units, batches)
            sides = {"seqflow": seqflow_side, "seqflow over TCP": seqflow_side.over_tcp()}
            try:
                if transferqueue is not None:
                    try:
                        transferqueue.start(units)
                        sides["TransferQueue"] = transferqueue
                    except TransferQueueError as error:
                        notes.append(f"TransferQueue skipped {units} unit(s): {error}")
                for samples, label in shapes_of(quick):
                    progress(f"{label}, {units} unit(s): {' and '.join(sides)}")
                    rows = {name: {"shape": label, "samples": samples, "units": units, "put": [], "get": []}
                            for name in sides}
                    for rep in range(-1, reps):  # -1: the warm-up, untimed
                        for name, side in list(sides.items()):
                            try:
                                put_seconds, get_seconds = side.put_get(
                                    samples, WARM_UP_SAMPLES if rep < 0 else samples, check=rep <= 0)
                            except TransferQueueError as error:
                                notes.append(f"TransferQueue stopped at {label}, {units} unit(s): {error}")
                                del sides[name]
                                continue
                            if rep >= 0:
                                rows[name]["put"].append(put_seconds)
                                rows[name]["get"].append(get_seconds)
                    ours.append({**rows["seqflow"], "tcp": rows["seqflow over TCP"]})
                    if "TransferQueue" in sides:
                        theirs.append(rows["TransferQueue"])
            finally:
                sides.pop("seqflow over TCP")
                sides.pop("seqflow").stop()
                if transferqueue is not None:
                    try:
                        transferqueue.stop_units()
                    except TransferQueueError as error:
                        if not transferqueue.alive:
                            notes.append(f"TransferQueue ended: {error}")
                            transferqueue.close()
                            transferqueue = None
    finally:
        if transferqueue is not None:
            transferqueue.close()
    return ours, theirs, notes


def table(header, rows, align) -> str:
    cells = [list(map(str, header))] + [list(map(str, r)) for r in rows]
    widths = [max(len(row[c]) for row in cells) for c in range(len(header))]
    lines = []
    for i, row in enumerate(cells):
        lines.append("  " + "  ".join(cell.ljust(w) if a == "l" else cell.rjust(w)
                                      for cell, w, a in zip(row, widths, align)).rstrip())
        if i == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def rate(row: dict, direction: str, pick=statistics.median) -> float:
    return payload_bytes(row["samples"]) / pick(row[direction]) / GB


def report(ours: list[dict], theirs: list[dict], reps: int) -> None:
    by_key = {(r["shape"], r["units"]): r for r in theirs}
    lines, ratios = [], {"put": [], "get": []}
    for row in ours:
        other = by_key.get((row["shape"], row["units"]))
        for direction in ("put", "get"):
            mine = rate(row, direction)
            cells = [row["shape"], f"{payload_bytes(row['samples']) / 2**20:,.0f}", row["units"], direction,
                     f"{mine:.2f}", f"{rate(row['tcp'], direction):.2f}", "-", "-", "-"]
            if other is not None:
                ratio = mine / rate(other, direction)
                best_ratio = rate(row, direction, min) / rate(other, direction, min)
                ratios[direction].append((ratio, row["shape"], row["units"]))
                cells[-3:] = [f"{rate(other, direction):.2f}", f"{ratio:.1f}x", f"{best_ratio:.1f}x"]
            lines.append(cells)
    print(f"## put / get throughput on one host, GB/s (1e9 bytes/s), median of {reps} "
          "(and the ratio of the best runs)")
    print("## seqflow: its default client (same-host copies through memory); seqflow TCP: local_copy off;")
    print("## TransferQueue: loopback TCP (ZeroMQ)")
    print()
    print(table(["shape", "MiB", "units", "direction", "seqflow GB/s", "seqflow TCP GB/s", "TransferQueue GB/s",
                 "seqflow / TQ", "best / best"], lines, "lrrlrrrrr"))
    print()
    for direction in ("put", "get"):
        if not ratios[direction]:
            print(f"SKIP {direction}: no TransferQueue numbers to compare with")
            continue
        worst = min(ratios[direction])
        verdict = "PASS" if worst[0] >= RATIO_TARGET else "FAIL"
        print(f"{verdict} {direction}: seqflow >= {RATIO_TARGET:.0f}x TransferQueue (medians) in every row: lowest "
              f"{worst[0]:.1f}x ({worst[1]}, {worst[2]} unit(s))")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the 1,024-sample shape only (about 2 minutes)")
    parser.add_argument("--reps", type=int, default=None, help="timed repetitions per row (default 3; quick 5)")
    parser.add_argument("--transferqueue-worker", metavar="SOCKET", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    reps = args.reps if args.reps is not None else 5 if args.quick else 3
    if reps < 1:
        parser.error("--reps must be >= 1")
    if args.transferqueue_worker:
        transferqueue_worker(args.transferqueue_worker, args.quick)
        return 0

    import seqflow
    from run_header import run_header

    started = time.perf_counter()
    for line in run_header(seqflow):
        print(line)
    print(f"mode: {'quick' if args.quick else 'full'}; {reps} timed repetitions per row", flush=True)
    print()
    ours, theirs, notes = run(seqflow, args.quick, reps)
    for note in notes:
        print(note)
    print()
    report(ours, theirs, reps)
    load = os.getloadavg()
    print(f"total {time.perf_counter() - started:.0f} s; load average at the end {load[0]:.1f} {load[1]:.1f} "
          f"{load[2]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
