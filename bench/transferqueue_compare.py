#!/usr/bin/env python3
"""TransferQueue side by side: put / get throughput and the key-value calls of
seqflow's remote mode (its own API and through `import transfer_queue`) and
of TransferQueue's SimpleStorage, on the same shapes in the same run.

    .venv/bin/python bench/transferqueue_compare.py [--quick] [--reps N]

Shapes: TransferQueue's perf-test shape, 1,024 samples x 9 fields x 8,192
float32 (288 MiB), and the larger one of bench/remote_bench.cc, 4,096 x 9 x
8,192 (1.125 GiB; not with --quick); 1, 2 and 4 storage units each.

Every side runs the same Python calls on the same TensorDict (torch.randn):
  put       client.put(data, partition_id=P)                    (insert + write)
  get_meta  client.get_meta(fields, n, P, mode="fetch", task_name=T)
  get_data  client.get_data(meta)
(get = get_meta + get_data), then 100 get_meta(..., mode="force_fetch")
whose median is the get_meta compared between compat and seqflow (one call
takes a fraction of a millisecond, less than a busy machine's noise), and an
untimed clear_partition; and the key-value calls at the scale of
verl's trainer, through the module (transfer_queue or seqflow):
  kv_batch_put  kv_batch_put(keys, P, fields, tags): the run's largest shape
                (4,096 samples; 1,024 with --quick) under uuid keys, with
                verl's tags {"status", "global_steps", "uid"}
  kv_batch_get  kv_batch_get(keys, P)                    (then an untimed kv_clear)
  kv_list       kv_list(P) of 100,000 keys with such tags and no fields, put
                (untimed) by kv_batch_put of 4,096 keys at a time; at 2 units
                only (listing asks the controller alone), as are all the
                key-value rows with --quick. compat lists the partition
                the seqflow side filled. Two rows: the partition unchanged
                since the client's last kv_list (a poll with nothing new:
                seqflow's controller then answers "unchanged" and the client
                builds the result from the listing it holds), and one tag
                rewritten (untimed) before each kv_list (a full listing
                travels). Below the table: the floor of any
                client that hands out TransferQueue's result, CPython's C
                unpickler building the same {partition: {key: tag}} from
                bytes already in memory (pickle.loads), and TransferQueue's
                time over it, the most any such client could show.
For each unit count all clusters run at once and the sides take turns,
repetition by repetition (in reverse order every other one), so that a burst
of load on a shared machine hits all; an untimed call of the row's own size
(an untimed kv_list) warms each side up first: the first full-size put into a
cluster faults in its units' memory and took 10x a later one, a cost that
fell on whichever side came first. The first repetition's data is
checked against what was put. Each row shows the medians of the repetitions
(--reps; 3, quick 5) and, since a shared machine's load comes in bursts,
also the ratio of the best runs.

seqflow: `seqflow serve controller` and N `seqflow serve storage` processes
on 127.0.0.1, the client in this process (seqflow.init with
controller.address): the default client, which moves large data to and from
same-host units through memory (local_copy), and beside it a client with
local_copy off, over loopback TCP (its column; put / get only; the verdict is
the default client's). compat: seqflow.compat.install_as_transfer_queue(),
then transfer_queue.init() joined to the same `seqflow serve` processes
through the environment variable by which processes started from an init()
caller join (SEQFLOW_TRANSFER_QUEUE), and transfer_queue.get_client() for
the data calls: TransferQueue's API on seqflow's services, the same ones.
TransferQueue: transfer_queue.init() with its
controller and N SimpleStorageUnit Ray actors on a local Ray instance (kept
on 127.0.0.1), the client in the driver: a worker process running this file
in TransferQueue's own virtual environment, made on first use by
tools/reference_peer.py under $SEQFLOW_REFERENCE_CACHE/tq-venv (default
~/.cache/seqflow-reference) with `pip install transferqueue==0.1.11
torch==2.13.0` (and pytest), so that nothing TransferQueue pulls in touches
this environment. If TransferQueue cannot be installed or
started, a line says why and seqflow's numbers are printed alone.

Targets: seqflow / TransferQueue >= 3 in every row (put, get and the
key-value calls); compat within 10% of seqflow's own API on put, get_meta
and get_data (ratio of medians). Timings on a shared machine are noisy;
compare the ratios of one run. The exit status is 0 whatever the targets
say (2 on bad arguments).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
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
KV_PARTITION = "bench-kv"
LIST_PARTITION = "bench-kv-list"
LIST_KEYS = 100_000
LIST_BATCH = 4_096  # keys per kv_batch_put (and kv_clear) filling the listed partition: a verl batch
LIST_UNITS = 2  # kv_list's unit count, and with --quick every key-value row's
GET_META_CALLS = 100  # about 10-40 ms of seqflow's per repetition
RATIO_TARGET = 3.0
COMPAT_TARGET = 1.10  # compat / seqflow's own API, ratio of medians
COMPAT_CALLS = ("put", "get_meta", "get_data")
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


def put_get(client, data, check: bool, get_meta_calls: int = GET_META_CALLS) -> tuple[float, float, float, float]:
    """Seconds of one put, one get_meta (fetch), one get_data of `data`, and the median of
    get_meta_calls get_meta (force_fetch: the same samples, nothing consumed); the partition is
    cleared after."""
    fields = list(data.keys())
    samples = data.batch_size[0]
    start = time.perf_counter()
    put_meta = client.put(data, partition_id=PARTITION)
    put_seconds = time.perf_counter() - start
    start = time.perf_counter()
    meta = client.get_meta(data_fields=fields, batch_size=samples, partition_id=PARTITION, mode="fetch",
                           task_name=TASK)
    get_meta_seconds = time.perf_counter() - start
    start = time.perf_counter()
    out = client.get_data(meta)
    get_data_seconds = time.perf_counter() - start
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
    # One get_meta of seqflow's takes a fraction of a millisecond, less than a busy machine's
    # scheduling noise: compared alone, it is the median of several.
    force_fetches = []
    for _ in range(get_meta_calls):
        start = time.perf_counter()
        client.get_meta(data_fields=fields, batch_size=samples, partition_id=PARTITION, mode="force_fetch",
                        task_name=TASK)
        force_fetches.append(time.perf_counter() - start)
    client.clear_partition(PARTITION)
    return put_seconds, get_meta_seconds, get_data_seconds, statistics.median(force_fetches)


def kv_keys(count: int) -> list[str]:
    """Keys as verl makes them: one uuid string per sample."""
    return [str(uuid.UUID(int=i)) for i in range(count)]


def verl_tags(keys: list[str]) -> list[dict]:
    """The tags verl's trainer puts beside its samples (and lists again to find finished ones)."""
    return [{"status": "finished", "global_steps": 3, "uid": key} for key in keys]


def kv_put_get(api, data, check: bool) -> tuple[float, float]:
    """Seconds of one kv_batch_put (fields and tags) and one kv_batch_get of `data` under
    verl-style keys, through `api` (a module: transfer_queue or seqflow); the keys are cleared after."""
    keys = kv_keys(data.batch_size[0])
    tags = verl_tags(keys)
    start = time.perf_counter()
    api.kv_batch_put(keys=keys, partition_id=KV_PARTITION, fields=data, tags=tags)
    put_seconds = time.perf_counter() - start
    start = time.perf_counter()
    out = api.kv_batch_get(keys=keys, partition_id=KV_PARTITION)
    get_seconds = time.perf_counter() - start
    if check:
        import torch

        last = list(data.keys())[-1]
        if out.batch_size[0] != len(keys) or not torch.equal(dense(out[last]), data[last]):
            raise RuntimeError(f"kv_batch_get returned other data than was put ({out.batch_size} for {len(keys)} keys)")
    del out
    api.kv_clear(keys=keys, partition_id=KV_PARTITION)
    return put_seconds, get_seconds


def kv_fill(api, partition: str, count: int) -> None:
    """`count` keys with tags and no fields, put in verl-sized batches."""
    keys = kv_keys(count)
    for first in range(0, count, LIST_BATCH):
        batch = keys[first:first + LIST_BATCH]
        api.kv_batch_put(keys=batch, partition_id=partition, fields=None, tags=verl_tags(batch))


def kv_list(api, partition: str, count: int, check: bool, changed: bool) -> float:
    """Seconds of one kv_list of the partition kv_fill filled; `changed`: first (untimed) one key's tag is
    rewritten, so that the partition differs from what this client listed last."""
    if changed:
        first = kv_keys(1)
        tag = dict(verl_tags(first)[0], global_steps=time.perf_counter_ns())
        api.kv_batch_put(keys=first, partition_id=partition, fields=None, tags=[tag])
    start = time.perf_counter()
    listed = api.kv_list(partition)
    seconds = time.perf_counter() - start
    if check:
        keys = kv_keys(count)
        tags = listed.get(partition, {})
        if len(tags) != count or tags.get(keys[-1]) != verl_tags(keys[-1:])[0]:
            raise RuntimeError(f"kv_list returned {len(tags)} keys of {count} (or other tags than were put)")
    return seconds


def materialize_floor(api, partition: str, reps: int) -> float:
    """Median seconds CPython's C unpickler takes to build kv_list(partition)'s result from bytes in memory."""
    import pickle

    encoded = pickle.dumps(api.kv_list(partition), protocol=pickle.HIGHEST_PROTOCOL)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        listed = pickle.loads(encoded)
        times.append(time.perf_counter() - start)
        del listed
    return statistics.median(times)


def kv_empty(api, partition: str, count: int) -> None:
    keys = kv_keys(count)
    for first in range(0, count, LIST_BATCH):
        api.kv_clear(keys=keys[first:first + LIST_BATCH], partition_id=partition)


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
    """A `seqflow serve` controller and `units` storage units, the default client connected to them;
    the key-value calls through the seqflow module."""

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

    @property
    def endpoint(self) -> str:
        return self.services[0].endpoint

    def put_get(self, samples: int, check: bool) -> tuple[float, float, float]:
        return put_get(self.client, self.batches[samples], check)

    def kv_put_get(self, samples: int, check: bool) -> tuple[float, float]:
        return kv_put_get(self.seqflow, self.batches[samples], check)

    def kv_fill(self, count: int) -> None:
        kv_fill(self.seqflow, LIST_PARTITION, count)

    def kv_list(self, count: int, check: bool, changed: bool) -> float:
        return kv_list(self.seqflow, LIST_PARTITION, count, check, changed)

    def kv_empty(self, count: int) -> None:
        kv_empty(self.seqflow, LIST_PARTITION, count)

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

    def put_get(self, samples: int, check: bool) -> tuple[float, float, float]:
        return put_get(self.side.tcp_client, self.side.batches[samples], check)


class SeqflowCompat:
    """seqflow as `import transfer_queue` (seqflow.compat.install_as_transfer_queue()), joined to the
    same `seqflow serve` processes as the seqflow side: transfer_queue.init() joins the system named by
    the environment variable through which processes started by an init() caller join it. The data
    calls through transfer_queue.get_client(), the key-value calls through the module, as on
    TransferQueue."""

    def __init__(self, seqflow_side: SeqflowSide):
        import seqflow.compat
        from seqflow.compat.transfer_queue import _system

        seqflow.compat.install_as_transfer_queue()
        import transfer_queue

        self.join_variable = _system.JOIN_ENV
        self.side = seqflow_side
        os.environ[self.join_variable] = json.dumps(
            {"address": seqflow_side.endpoint, "polling_mode": False, "metrics_endpoint": None})
        self.tq = transfer_queue
        try:
            transfer_queue.init()
            self.client = transfer_queue.get_client()
        except BaseException:
            self.stop()
            raise

    def put_get(self, samples: int, check: bool) -> tuple[float, float, float]:
        return put_get(self.client, self.side.batches[samples], check)

    def kv_put_get(self, samples: int, check: bool) -> tuple[float, float]:
        return kv_put_get(self.tq, self.side.batches[samples], check)

    def kv_list(self, count: int, check: bool, changed: bool) -> float:
        """The partition the seqflow side filled: the same services, the same keys."""
        return kv_list(self.tq, LIST_PARTITION, count, check, changed)

    def stop(self) -> None:
        self.tq.close()  # a joined system: closes the client, the services stay
        os.environ.pop(self.join_variable, None)


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

    def put_get(self, samples: int, check: bool) -> tuple[float, float, float]:
        return tuple(self.call("put_get", samples, check))

    def kv_put_get(self, samples: int, check: bool) -> tuple[float, float]:
        return tuple(self.call("kv_put_get", samples, check))

    def kv_fill(self, count: int) -> None:
        self.call("kv_fill", LIST_PARTITION, count)

    def kv_list(self, count: int, check: bool, changed: bool) -> float:
        return self.call("kv_list", LIST_PARTITION, count, check, changed)

    def kv_empty(self, count: int) -> None:
        self.call("kv_empty", LIST_PARTITION, count)

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
            # address="local": a Ray of its own, even where another job's `ray start` cluster runs.
            ray.init(address="local", num_cpus=8, include_dashboard=False, object_store_memory=256 << 20,
                     log_to_driver=False)
            try:
                batches = make_batches(quick)

                def start(units: int) -> None:
                    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": units}}}))

                calls = {
                    "start": start,
                    "stop": tq.close,
                    # TransferQueue's get_meta is compared as part of get only: one force_fetch will do.
                    "put_get": lambda samples, check: put_get(tq.get_client(), batches[samples],
                                                                    check, get_meta_calls=1),
                    "kv_put_get": lambda samples, check: kv_put_get(tq, batches[samples], check),
                    "kv_fill": lambda partition, count: kv_fill(tq, partition, count),
                    "kv_list": lambda partition, count, check, changed: kv_list(tq, partition, count, check,
                                                                                changed),
                    "kv_empty": lambda partition, count: kv_empty(tq, partition, count),
                }
                connection.send(("ok", tq.__version__))
                while (command := connection.recv()) is not None:
                    op, *args = command
                    try:
                        connection.send(("ok", calls[op](*args)))
                    except Exception as error:  # noqa: BLE001 - the parent reports it
                        connection.send(("error", f"{op}: {type(error).__name__}: {error}"))
            finally:
                tq.close()
                ray.shutdown()


# --------------------------------------------------------------------------
# The run and the report


SEQFLOW, COMPAT, TCP, TQ = "seqflow", "compat", "seqflow TCP", "TransferQueue"


def take_turns(sides: dict, names, reps: int, call, notes: list, where: str) -> dict[str, list]:
    """call(side, rep) for the named sides in turn, repetition by repetition: rep -1 is the warm-up
    (untimed), and every other repetition runs the sides in reverse order, so that none always
    follows the same one. {name: [the timed repetitions' results]}. A side that fails (only
    TransferQueue's worker may) leaves `sides` for the rest of this unit count."""
    results = {name: [] for name in names if name in sides}
    for rep in range(-1, reps):
        order = [name for name in results if name in sides]
        for name in order if rep % 2 == 0 else order[::-1]:
            try:
                result = call(sides[name], rep)
            except TransferQueueError as error:
                notes.append(f"TransferQueue stopped at {where}: {error}")
                del sides[name]
                continue
            if rep >= 0:
                results[name].append(result)
    return {name: values for name, values in results.items() if name in sides}


def each_side(sides: dict, names, call, notes: list, where: str) -> None:
    """call(side) once for each named side: untimed set-up and clean-up."""
    take_turns(sides, names, 0, lambda side, _rep: call(side), notes, where)


def timed_rows(results: dict, calls, **row) -> list[dict]:
    """One row per call from take_turns' results, whose repetitions are tuples of seconds, a call each."""
    return [{**row, "call": call, "times": {name: [rep[i] for rep in reps] for name, reps in results.items()}}
            for i, call in enumerate(calls)]


def run(seqflow, quick: bool, reps: int) -> tuple[list[dict], list[str]]:
    """The rows ({call, shape, samples, units, times: {side: [seconds]}}) and lines about TransferQueue."""
    try:
        transferqueue = TransferQueueSide(quick)
        notes = [f"TransferQueue {transferqueue.version} (SimpleStorage: controller and storage units as Ray "
                 f"actors on a local Ray instance, client in the driver), venv {TQ_VENV}"]
    except TransferQueueError as error:
        transferqueue, notes = None, [f"TransferQueue not measured: {error}"]
    batches = make_batches(quick)
    kv_samples, kv_label = shapes_of(quick)[-1]
    rows = []
    try:
        for units in UNITS:
            seqflow_side = SeqflowSide(seqflow, units, batches)
            sides = {SEQFLOW: seqflow_side}
            try:
                sides[COMPAT] = SeqflowCompat(seqflow_side)
                sides[TCP] = seqflow_side.over_tcp()
                if transferqueue is not None:
                    try:
                        transferqueue.start(units)
                        sides[TQ] = transferqueue
                    except TransferQueueError as error:
                        notes.append(f"TransferQueue skipped {units} unit(s): {error}")
                for samples, label in shapes_of(quick):
                    where = f"{label}, {units} unit(s)"
                    progress(f"put / get {where}: {', '.join(sides)}")
                    results = take_turns(sides, (SEQFLOW, COMPAT, TCP, TQ), reps, lambda side, rep: side.put_get(
                        samples, check=rep <= 0), notes, where)
                    rows += timed_rows(results, ("put", "get_meta fetch", "get_data", "get_meta"), shape=label,
                                       samples=samples, units=units)
                kv_sides = (SEQFLOW, COMPAT, TQ)
                if units == LIST_UNITS or not quick:
                    where = f"kv {kv_samples} keys, {units} unit(s)"
                    progress(f"kv_batch_put / kv_batch_get of {kv_samples:,} keys x {kv_label}, {units} unit(s)")
                    results = take_turns(sides, kv_sides, reps, lambda side, rep: side.kv_put_get(
                        kv_samples, check=rep <= 0), notes, where)
                    rows += timed_rows(results, ("kv_batch_put", "kv_batch_get"), shape=kv_label,
                                       samples=kv_samples, units=units)
                if units == LIST_UNITS:
                    where = f"kv_list, {units} unit(s)"
                    progress(f"kv_list of {LIST_KEYS:,} keys with tags (after {-(-LIST_KEYS // LIST_BATCH)} "
                             f"kv_batch_put of tags alone), {units} unit(s)")
                    filled = (SEQFLOW, TQ)  # compat lists the seqflow side's partition
                    each_side(sides, filled, lambda side: side.kv_fill(LIST_KEYS), notes, where)
                    floor = materialize_floor(seqflow, LIST_PARTITION, reps)
                    for changed, since in ((False, "unchanged"), (True, "1 tag changed")):
                        results = take_turns(sides, kv_sides, reps, lambda side, rep: (
                            side.kv_list(LIST_KEYS, check=rep <= 0, changed=changed),), notes, where)
                        rows += timed_rows(results, ("kv_list",), shape=f"{LIST_KEYS:,} keys, tags, {since}",
                                           samples=LIST_KEYS, units=units)
                        rows[-1]["floor"] = floor
                    each_side(sides, filled, lambda side: side.kv_empty(LIST_KEYS), notes, where)
            finally:
                sides.pop(TCP, None)
                if COMPAT in sides:
                    sides.pop(COMPAT).stop()
                sides.pop(SEQFLOW).stop()
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
    return rows, notes


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


def throughput_rows(rows: list[dict]) -> list[dict]:
    """The put rows, and get rows whose repetitions are get_meta (the fetch) + get_data."""
    out = []
    by_call = {(row["call"], row["shape"], row["units"]): row for row in rows}
    for row in rows:
        if row["call"] == "put":
            out.append({**row, "direction": "put"})
            meta = by_call[("get_meta fetch", row["shape"], row["units"])]["times"]
            data = by_call[("get_data", row["shape"], row["units"])]["times"]
            out.append({**row, "direction": "get",
                        "times": {name: [m + d for m, d in zip(meta[name], data[name])] for name in meta}})
    return out


def seconds(row: dict, side: str, pick=statistics.median) -> float:
    return pick(row["times"][side])


def gb_per_s(row: dict, side: str) -> str:
    return f"{payload_bytes(row['samples']) / seconds(row, side) / GB:.2f}" if side in row["times"] else "-"


def ms(row: dict, side: str) -> str:
    return f"{seconds(row, side) * 1e3:,.2f}" if side in row["times"] else "-"


def speedups(row: dict) -> list[str]:
    """seqflow / TransferQueue: the medians' ratio, the best runs' ratio."""
    if TQ not in row["times"]:
        return ["-", "-"]
    return [f"{seconds(row, TQ) / seconds(row, SEQFLOW):.1f}x",
            f"{seconds(row, TQ, min) / seconds(row, SEQFLOW, min):.1f}x"]


def verdict(rows: list[dict], label: str) -> None:
    """PASS when seqflow / TransferQueue >= RATIO_TARGET (medians) in every row."""
    ratios = [(seconds(row, TQ) / seconds(row, SEQFLOW), row["shape"], row["units"]) for row in rows
              if TQ in row["times"]]
    if not ratios:
        print(f"SKIP {label}: no TransferQueue numbers to compare with")
        return
    worst = min(ratios)
    print(f"{'PASS' if worst[0] >= RATIO_TARGET else 'FAIL'} {label}: seqflow >= {RATIO_TARGET:.0f}x TransferQueue "
          f"(medians) in every row: lowest {worst[0]:.1f}x ({worst[1]}, {worst[2]} unit(s))")


def report(rows: list[dict], reps: int) -> None:
    throughput = throughput_rows(rows)
    print(f"## put / get throughput on one host, GB/s (1e9 bytes/s), median of {reps} "
          "(and the ratio of the best runs); get = get_meta + get_data")
    print("## seqflow: its default client (same-host copies through memory); seqflow TCP: local_copy off;")
    print("## compat: seqflow through `import transfer_queue` (install_as_transfer_queue()), same services;")
    print("## TransferQueue: loopback TCP (ZeroMQ)")
    print()
    print(table(["shape", "MiB", "units", "direction", "seqflow GB/s", "seqflow TCP GB/s", "compat GB/s",
                 "TransferQueue GB/s", "seqflow / TQ", "best / best"],
                [[row["shape"], f"{payload_bytes(row['samples']) / 2**20:,.0f}", row["units"], row["direction"],
                  gb_per_s(row, SEQFLOW), gb_per_s(row, TCP), gb_per_s(row, COMPAT), gb_per_s(row, TQ),
                  *speedups(row)] for row in throughput], "lrrlrrrrrr"))
    print()
    kv = [row for row in rows if row["call"].startswith("kv_")]
    print(f"## key-value calls (verl's tags: status, global_steps, uid), ms, median of {reps}; "
          "seqflow: the seqflow module; compat and TransferQueue: the transfer_queue module")
    print()
    print(table(["call", "keys x fields", "MiB", "units", "seqflow ms", "compat ms", "TransferQueue ms",
                 "seqflow / TQ", "best / best"],
                [[row["call"], row["shape"] if row["call"] == "kv_list" else f"{row['samples']:,} x {FIELDS}x{SEQ}",
                  "-" if row["call"] == "kv_list" else f"{payload_bytes(row['samples']) / 2**20:,.0f}", row["units"],
                  ms(row, SEQFLOW), ms(row, COMPAT), ms(row, TQ), *speedups(row)] for row in kv], "llrrrrrrr"))
    for row in kv:
        if "floor" in row:
            over_floor = (f" = {seconds(row, TQ) / row['floor']:.1f}x of it, the most any such client could show"
                          if TQ in row["times"] else "")
            print(f"kv_list floor ({row['shape']}): CPython's C unpickler builds the same result from bytes in "
                  f"memory in {row['floor'] * 1e3:.2f} ms (median of {reps}); TransferQueue takes "
                  f"{ms(row, TQ)} ms{over_floor}; seqflow {ms(row, SEQFLOW)} ms = "
                  f"{seconds(row, SEQFLOW) / row['floor']:.2f}x the floor")
    print()
    by_call = {(row["shape"], row["units"], row["call"]): row for row in rows}
    compared = [by_call[(row["shape"], row["units"], call)] for row in rows if row["call"] == "put"
                for call in COMPAT_CALLS]
    print(f"## the compat layer against seqflow's own API on the same services, ms, median of {reps}; get_meta: "
          f"each repetition the median of {GET_META_CALLS} calls (force_fetch, the same samples)")
    print()
    print(table(["shape", "units", "call", "seqflow ms", "compat ms", "compat / seqflow"],
                [[row["shape"], row["units"], row["call"], ms(row, SEQFLOW), ms(row, COMPAT),
                  f"{seconds(row, COMPAT) / seconds(row, SEQFLOW):.2f}" if COMPAT in row["times"] else "-"]
                 for row in compared], "lrlrrr"))
    print()
    for direction in ("put", "get"):
        verdict([row for row in throughput if row["direction"] == direction], direction)
    for call in ("kv_batch_put", "kv_batch_get", "kv_list"):
        verdict([row for row in kv if row["call"] == call], call)
    for call in COMPAT_CALLS:
        ratios = [(seconds(row, COMPAT) / seconds(row, SEQFLOW), row["shape"], row["units"])
                  for row in compared if row["call"] == call and COMPAT in row["times"]]
        if not ratios:
            print(f"SKIP compat {call}: no numbers")
            continue
        worst = max(ratios)
        print(f"{'PASS' if worst[0] <= COMPAT_TARGET else 'FAIL'} compat {call}: within "
              f"{(COMPAT_TARGET - 1) * 100:.0f}% of seqflow's own API (ratio of medians) in every row: highest "
              f"{worst[0]:.2f}x ({worst[1]}, {worst[2]} unit(s)); geometric mean of the rows "
              f"{statistics.geometric_mean(ratio for ratio, _, _ in ratios):.2f}x")


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
    rows, notes = run(seqflow, args.quick, reps)
    for note in notes:
        print(note)
    print()
    report(rows, reps)
    load = os.getloadavg()
    print(f"total {time.perf_counter() - started:.0f} s; load average at the end {load[0]:.1f} {load[1]:.1f} "
          f"{load[2]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
