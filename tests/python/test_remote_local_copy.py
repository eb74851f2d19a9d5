"""Same-host copies in remote mode, between real `seqflow serve` processes
and this one: large puts and gets move through memory (the units' metrics
count the bytes) and come back exact, also in a forked child; small ones and
clients that opt out use TCP; a unit in another pid namespace, where this
process's pid names another process, is detected and sent the bytes; a peer
speaking the wire protocol cannot make a unit copy its own memory."""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import struct
import urllib.request

import pytest

import seqflow
from remote_services import LOCAL, ServeProcess
from required import require

torch = require("torch")
zmq = require("zmq")
msgpack = require("msgpack")

ROWS, WIDTH = 64, 8192  # 2 MiB per float32 field: above the local-copy threshold


class Services:
    """A controller and storage units as processes, each unit with a metrics endpoint."""

    def __init__(self, units: int, wrapper: tuple[str, ...] = (), stop_signal: int = signal.SIGTERM):
        self.stop_signal = stop_signal
        self.controller = ServeProcess("controller", "--bind", LOCAL, "--storage-units", str(units))
        self.units = []
        try:
            for _ in range(units):
                self.units.append(ServeProcess("storage", "--controller", self.controller.endpoint, "--bind", LOCAL,
                                               "--metrics", "127.0.0.1:0", wrapper=wrapper))
        except BaseException:
            self.stop()
            raise

    def client(self, **kwargs) -> seqflow.Client:
        return seqflow.Client.remote(self.controller.endpoint, timeout=30.0, **kwargs)

    def copied_bytes(self, direction: str) -> float:
        total = 0.0
        pattern = re.compile(r'^seqflow_storage_local_copy_bytes_total\{direction="' + direction + r'"\} (\S+)$',
                             re.MULTILINE)
        for unit in self.units:
            with urllib.request.urlopen(unit.metrics_url + "/metrics", timeout=10) as reply:
                found = pattern.search(reply.read().decode())
            assert found is not None, "the unit's metrics lack seqflow_storage_local_copy_bytes_total"
            total += float(found.group(1))
        return total

    def stop(self) -> None:
        for unit in self.units:
            unit.stop(self.stop_signal)
        self.controller.stop()


@pytest.fixture
def services():
    started: list[Services] = []

    def start(units: int = 1, **kwargs) -> Services:
        started.append(Services(units, **kwargs))
        return started[-1]

    yield start
    for s in started:
        s.stop()


def batch(rows: int = ROWS, width: int = WIDTH) -> dict:
    generator = torch.Generator().manual_seed(rows * width)
    return {"logits": torch.randn(rows, width, generator=generator),
            "ids": torch.arange(rows * width, dtype=torch.int64).reshape(rows, width),
            "text": [f"sample {i}" for i in range(rows)]}


def put_and_get(client: seqflow.Client, data: dict, partition: str = "p"):
    client.put(data, partition_id=partition)
    meta = client.get_meta(["logits", "ids", "text"], len(data["text"]), partition, task_name="t")
    return meta, client.get_data(meta, format="torch")


def expect_same(data: dict, meta, out) -> None:
    order = torch.tensor(meta.global_indexes) - min(meta.global_indexes)
    assert torch.equal(out["logits"], data["logits"][order])
    assert torch.equal(out["ids"], data["ids"][order])
    assert list(out["text"]) == [data["text"][i] for i in order.tolist()]


@pytest.mark.parametrize("units", [1, 2])
def test_large_puts_and_gets_move_through_memory_between_processes(services, units):
    cluster = services(units)
    client = cluster.client()
    data = batch()
    meta, out = put_and_get(client, data)
    expect_same(data, meta, out)
    dense_bytes = data["logits"].nbytes + data["ids"].nbytes
    assert cluster.copied_bytes("put") >= dense_bytes
    assert cluster.copied_bytes("get") >= dense_bytes
    client.close()


def _get_in_child(client, rows, queue) -> None:
    # The forked copy of a remote client connects anew in the child. numpy,
    # not torch: torch's thread pool does not survive a fork.
    try:
        meta = client.get_meta(["logits", "ids"], rows, "p", mode="force_fetch")
        out = client.get_data(meta, format="numpy")
        queue.put((None, list(meta.global_indexes), float(out["logits"].astype("float64").sum()),
                   int(out["ids"].sum())))
    except BaseException as error:  # noqa: BLE001 - re-raised by the test
        queue.put((repr(error), None, None, None))


def test_a_forked_child_copies_through_memory_as_itself(services):
    cluster = services(1)
    client = cluster.client()
    data = batch()
    client.put(data, partition_id="p")
    before = cluster.copied_bytes("get")
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_get_in_child, args=(client, ROWS, queue))
    child.start()
    try:
        error, indexes, logits_sum, ids_sum = queue.get(timeout=60)
        child.join(60)
    finally:
        if child.is_alive():
            child.kill()
            child.join(30)
    assert error is None, f"the child failed: {error}"
    assert child.exitcode == 0
    order = torch.tensor(indexes) - min(indexes)
    assert logits_sum == pytest.approx(float(data["logits"][order].double().sum()))
    assert ids_sum == int(data["ids"].sum())
    assert cluster.copied_bytes("get") - before >= data["logits"].nbytes + data["ids"].nbytes
    client.close()


def test_small_transfers_and_opted_out_clients_use_tcp(services):
    cluster = services(1)
    small = batch(rows=4, width=64)
    expect_same(small, *put_and_get(cluster.client(), small, "small"))
    config = {"controller": {"address": cluster.controller.endpoint}, "timeout": 30.0, "local_copy": False}
    opted_out = seqflow.Client.from_config(config)
    assert opted_out.remote_config.local_copy is False
    data = batch()
    expect_same(data, *put_and_get(opted_out, data, "large"))
    assert cluster.copied_bytes("put") == 0
    assert cluster.copied_bytes("get") == 0


def test_local_copy_must_be_a_bool():
    with pytest.raises(ValueError, match="local_copy must be True or False, got 'yes'"):
        seqflow.RemoteConfig("tcp://127.0.0.1:1", local_copy="yes")


def test_a_unit_in_another_pid_namespace_is_sent_the_bytes(services):
    # In its own pid namespace the unit cannot find this process under our
    # pid, nor we it under its own: both directions fall back to TCP.
    # unshare does not pass SIGTERM on; killed, it sends the unit SIGTERM.
    cluster = services(2, wrapper=("unshare", "--pid", "--fork", "--kill-child=SIGTERM"), stop_signal=signal.SIGKILL)
    client = cluster.client()
    for round_ in range(2):  # the second round goes straight to TCP
        data = batch()
        expect_same(data, *put_and_get(client, data, f"p{round_}"))
    assert cluster.copied_bytes("put") == 0
    assert cluster.copied_bytes("get") == 0
    client.close()


def _raw_call(endpoint: str, op: bytes, header: dict) -> tuple[int, list[bytes]]:
    """One request as a hostile peer sends it, straight on the wire: the
    reply's status byte and its frames."""
    context = zmq.Context()
    try:
        peer = context.socket(zmq.DEALER)
        peer.setsockopt(zmq.LINGER, 0)
        peer.connect(endpoint)
        peer.send_multipart([struct.pack("<Q", 1) + op, msgpack.packb(header, use_bin_type=True)])
        assert peer.poll(10_000), f"no reply to {op!r} within 10 s"
        envelope, *frames = peer.recv_multipart()
        return envelope[8], frames
    finally:
        context.destroy(linger=0)


def test_a_peer_cannot_make_a_unit_copy_its_own_memory(services):
    # The attack this closes: a get "with local copy" used to answer with the
    # unit's pid and token, and a put naming them plus any address range made
    # the unit copy its own memory into a value anyone could read back.
    cluster = services(1)
    client = cluster.client()
    data = batch()
    meta, _ = put_and_get(client, data)
    unit = cluster.units[0]
    copied = cluster.copied_bytes("put")
    keys = {"indexes": struct.pack(f"<{len(meta)}q", *meta.global_indexes), "partitions": ["p"],
            "partition_ends": struct.pack("<Q", len(meta))}

    status, frames = _raw_call(unit.endpoint, b"get", {**keys, "fields": ["logits"], "local_copy": True})
    assert status == 0
    reply = msgpack.unpackb(frames[0])
    assert set(reply) == {"fields"}, "no description of the unit's memory, no lease: the bytes themselves"
    assert sum(len(f) for f in frames[1:]) == data["logits"].nbytes

    described = {"frames": struct.pack("<2Q", 4096, 1 << 20)}
    naming_the_unit = {**described, "pid": unit.process.pid, "token_address": 4096, "token": bytes(16)}
    status, frames = _raw_call(unit.endpoint, b"put", {**keys, "columns": [], "local_frames": naming_the_unit})
    assert status != 0 and b"pid" in frames[0], frames
    status, frames = _raw_call(unit.endpoint, b"put",
                               {**keys, "columns": [], "local_frames": {**described, "session": os.urandom(16)}})
    assert status == 0
    assert "no open local-copy session" in msgpack.unpackb(frames[0])["local_copy_refused"]

    # The samples are as they were put.
    expect_same(data, meta, client.get_data(meta, format="torch"))
    assert cluster.copied_bytes("put") == copied, "the unit copied nothing for the hostile puts"
    client.close()
