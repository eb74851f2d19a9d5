"""Faults of remote mode, with `seqflow serve` processes on 127.0.0.1: a
storage unit SIGKILLed under load and started again (empty: its samples are
not served until they are put again), the controller SIGKILLed and started
again from its last checkpoint, and malformed traffic sent to the
controller's port by a peer that is not a seqflow client."""

from __future__ import annotations

import collections
import os
import socket
import struct
import threading
import time
from typing import Callable

import numpy as np
import pytest

import seqflow

from remote_cluster import process_cluster  # noqa: F401 (fixture)
from required import require
from support import unit_of, wait_until

pytestmark = pytest.mark.alone  # deadlines on wall-clock time: no other test file runs meanwhile

# Short, so that a dead peer shows quickly; every failing call must return
# within its timeout plus this margin (2 shared cores, other tests running).
CALL_TIMEOUT = 2.0
MARGIN = 3.0
PUT_SIZE = 8  # samples per put
OTHER_SIZE = 128  # two blocks of global indexes: samples on both units
FETCH_SIZE = 4  # samples per get_meta; PUT_SIZE is a multiple of it, so nothing is left over


def ids_of(meta) -> list[int]:
    return [entry["id"] for entry in meta.custom_meta]


def put_ids(client, partition: str, ids):
    """Samples whose field x and custom_meta id both hold the sample's id."""
    ids = list(ids)
    return client.put({"x": np.array(ids, dtype=np.int64)}, partition_id=partition,
               custom_meta=[{"id": i} for i in ids])


def produced_indexes(client, partition: str) -> set[int]:
    indexes, produced = client.get_production_status(["x"], partition)
    return set(indexes[produced].tolist())


def consumed_indexes(client, task: str, partition: str) -> set[int]:
    indexes, consumed = client.get_consumption_status(task, partition)
    return set(indexes[consumed].tolist())


def timed(call):
    """(result or None, error or None, seconds) of call()."""
    started = time.monotonic()
    try:
        return call(), None, time.monotonic() - started
    except Exception as error:  # noqa: BLE001 - the caller judges the error
        return None, error, time.monotonic() - started


# ---- a storage unit dies under load ------------------------------------------

class Ledger:
    """What the threads of a pipeline did, under one condition variable so
    that the test waits for a state instead of sleeping."""

    def __init__(self):
        self.changed = threading.Condition()
        self.put_ids: list[int] = []  # ids of samples whose put succeeded
        self.failed_puts: list[tuple[list[int], BaseException, float]] = []  # ids, error, seconds
        self.fetched_ids: list[int] = []  # ids get_meta handed out (consumed for the task)
        self.consumed_ids: list[int] = []  # ids whose data get_data returned
        self.failed_gets: list[tuple[list[int], BaseException, float]] = []
        self.thread_errors: list[BaseException] = []  # anything a thread did not expect

    def add(self, name: str, *entries) -> None:
        """Appends entries to the list `name` and wakes the waiters."""
        with self.changed:
            getattr(self, name).extend(entries)
            self.changed.notify_all()

    def wait_for(self, predicate: Callable[["Ledger"], bool], timeout: float, what: str) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: predicate(self) or bool(self.thread_errors), timeout):
                raise AssertionError(f"not within {timeout} s: {what}")
            if self.thread_errors:
                raise AssertionError(f"a pipeline thread failed: {self.thread_errors!r}")


class Pipeline:
    """A producer thread putting PUT_SIZE samples at a time into partition
    "train", and consumer threads fetching (task "train") and reading them,
    each with its own client with a CALL_TIMEOUT. The producer stops at its
    first failed put until `resume` is set, then puts `after_restart` more
    samples; every outcome goes to the ledger."""

    def __init__(self, cluster, consumers: int, after_restart: int):
        self.cluster = cluster
        self.ledger = Ledger()
        self.resume = threading.Event()
        self.stop = threading.Event()
        self.after_restart = after_restart
        self.resumed_ids: list[int] = []  # ids put once production resumed
        self.threads = [threading.Thread(target=self._guard, args=(self._produce,), daemon=True)]
        self.threads += [threading.Thread(target=self._guard, args=(self._consume,), daemon=True)
                         for _ in range(consumers)]

    def __enter__(self) -> "Pipeline":
        producer, *consumers = self.threads
        producer.start()
        # A fetch from a partition that does not exist yet is a KeyError.
        self.ledger.wait_for(lambda seen: seen.put_ids, 30, "the first put")
        for thread in consumers:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.resume.set()
        deadline = time.monotonic() + 30
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in self.threads), "a pipeline thread did not end"
        assert not self.ledger.thread_errors, f"a pipeline thread failed: {self.ledger.thread_errors!r}"

    def _guard(self, body) -> None:
        try:
            body()
        except BaseException as error:  # noqa: BLE001 - reported by ledger.wait_for and the test
            self.ledger.add("thread_errors", error)

    def _produce(self) -> None:
        client = self.cluster.client(timeout=CALL_TIMEOUT)
        next_id = 0
        # Bounded: before the fault the test kills the unit long before this many puts.
        for _ in range(100_000):
            if self.stop.is_set():
                return
            if self.resume.is_set() and len(self.resumed_ids) >= self.after_restart:
                return
            ids = list(range(next_id, next_id + PUT_SIZE))
            next_id += PUT_SIZE
            _, error, seconds = timed(lambda: put_ids(client, "train", ids))
            if error is None:
                if self.resume.is_set():
                    self.resumed_ids.extend(ids)
                self.ledger.add("put_ids", *ids)
                continue
            self.ledger.add("failed_puts", (ids, error, seconds))
            if self.resume.is_set():
                raise AssertionError(f"a put after the restart failed: {error!r}")
            self.resume.wait(60)
        raise AssertionError("the producer's put bound ran out")

    def _consume(self) -> None:
        client = self.cluster.client(timeout=CALL_TIMEOUT)
        while not self.stop.is_set():
            try:
                meta = client.get_meta(["x"], FETCH_SIZE, "train", task_name="train", timeout=0.5)
            except TimeoutError:
                continue  # nothing ready within 0.5 s; stop is checked again
            ids = ids_of(meta)
            self.ledger.add("fetched_ids", *ids)
            data, error, seconds = timed(lambda: client.get_data(meta, format="numpy"))
            if error is not None:
                self.ledger.add("failed_gets", (ids, error, seconds))
                continue
            assert data["x"].tolist() == ids, f"data {data['x'].tolist()} under ids {ids}"
            self.ledger.add("consumed_ids", *ids)


def test_killed_storage_unit_fails_calls_in_time_and_the_pipeline_resumes_on_restart(process_cluster):
    cluster = process_cluster(2)
    observer = cluster.client(timeout=20.0)  # the test's own view; waits out the restarts
    other_put = put_ids(observer, "other", range(1000, 1000 + OTHER_SIZE))
    assert {unit_of(index, 2) for index in other_put.global_indexes} == {0, 1}  # data on both units
    after_restart = 12 * PUT_SIZE

    with Pipeline(cluster, consumers=2, after_restart=after_restart) as pipeline:
        ledger = pipeline.ledger
        ledger.wait_for(lambda seen: len(seen.consumed_ids) >= 4 * PUT_SIZE, 30, "32 samples consumed")
        victim = cluster.units_by_endpoint()[0]
        cluster.kill_unit(victim)

        # The producer's next put fails, with the timeout's error and in time:
        # a failed put waits for the dead unit (one timeout) and then for the
        # controller's undo of the insert, which itself waits on the dead unit
        # while it drops the released data (a second timeout).
        ledger.wait_for(lambda seen: seen.failed_puts, 30, "a put failed after the kill")
        failed_ids, error, seconds = ledger.failed_puts[0]
        assert isinstance(error, TimeoutError), repr(error)
        assert seconds <= 2 * CALL_TIMEOUT + MARGIN, f"the failed put took {seconds:.1f} s"

        # Reading data that lives on the dead unit fails within the timeout.
        short = cluster.client(timeout=CALL_TIMEOUT)
        other = short.get_meta(["x"], PUT_SIZE, "other", mode="force_fetch")
        _, error, seconds = timed(lambda: short.get_data(other, format="numpy"))
        assert isinstance(error, TimeoutError), repr(error)
        assert seconds <= CALL_TIMEOUT + MARGIN, f"get_data took {seconds:.1f} s"

        # The controller serves the other partition: metadata, status, fetch.
        _, error, _ = timed(lambda: (short.check_production_status(["x"], "other"), short.get_partition_list()))
        assert error is None, repr(error)  # within the calls' own timeout, or they would have raised
        fetched = short.get_meta(["x"], OTHER_SIZE, "other", task_name="eval")
        assert sorted(ids_of(fetched)) == list(range(1000, 1000 + OTHER_SIZE))
        assert short.check_consumption_status("eval", "other")

        # Production status holds exactly the puts that succeeded: nothing of
        # the failed put is ready (the producer waits, so this is stable).
        everything = observer.get_meta(["x"], 0, "train", mode="force_fetch")
        id_of = dict(zip(everything.global_indexes, ids_of(everything)))
        indexes, produced = observer.get_production_status(["x"], "train")
        ready_ids = {id_of[i] for i in indexes[produced].tolist()}
        assert ready_ids == set(ledger.put_ids)
        assert not ready_ids & set(failed_ids)

        cluster.restart_unit(victim)
        # The new unit registers with a new instance id: the controller takes
        # every sample routed to it (unit 0's blocks), in every partition,
        # consumed or not, for not produced, as its data is gone.
        everything = observer.get_meta([], 0, "train", mode="force_fetch")  # produced or not
        on_victim = [position for position, index in enumerate(everything.global_indexes)
                     if unit_of(index, 2) == 0]
        lost = everything.select_samples(on_victim)
        lost_indexes = set(lost.global_indexes)
        wait_until(lambda: not produced_indexes(observer, "train") & lost_indexes, 30,
                   "the restarted unit's samples are no longer produced")
        assert produced_indexes(observer, "train") == set(everything.global_indexes) - lost_indexes
        assert produced_indexes(observer, "other") == {i for i in other_put.global_indexes if unit_of(i, 2) == 1}
        # Not consumed yet (for train): not served until they are put again.
        unserved = lost_indexes - consumed_indexes(observer, "train", "train")
        unserved_ids = {ids_of(lost)[k] for k, index in enumerate(lost.global_indexes)
                        if index in unserved}
        # Inserts wait while the controller drops the failed put's data on the
        # dead unit; the probe returns once that drop reached the new unit.
        put_ids(observer, "probe", range(PUT_SIZE))
        observer.clear_partition("probe")
        # The consumers go on fetching while the lost samples wait: they run
        # dry with fewer than FETCH_SIZE ready, none of them lost.
        wait_until(lambda: len(produced_indexes(observer, "train") -
                               consumed_indexes(observer, "train", "train")) < FETCH_SIZE, 30,
                   "the consumers fetched the samples the restarted unit did not hold")
        assert not unserved & consumed_indexes(observer, "train", "train"), "a lost sample was served"
        assert not unserved_ids & set(ledger.fetched_ids), "a lost sample was served"
        # The producer puts the lost samples again; the unconsumed ones are
        # then served, with their data, and the consumed ones not again: so
        # everything put before the fault is handed out once.
        observer.put({"x": np.array(ids_of(lost), dtype=np.int64)}, metadata=lost)
        ledger.wait_for(lambda seen: len(seen.fetched_ids) == len(seen.put_ids), 30,
                        "the consumers fetched every sample put before the fault")
        ledger.wait_for(lambda seen: unserved_ids <= set(seen.consumed_ids), 30,
                        "the consumers read the data of the lost samples put again")
        pipeline.resume.set()
        ledger.wait_for(lambda seen: len(pipeline.resumed_ids) >= after_restart and
                        set(pipeline.resumed_ids) <= set(seen.consumed_ids), 60,
                        "every sample put after the restart was consumed")

    assert not ledger.thread_errors, ledger.thread_errors
    assert len(ledger.failed_puts) == 1, [(ids, repr(e)) for ids, e, _ in ledger.failed_puts]
    fetched = collections.Counter(ledger.fetched_ids)
    assert max(fetched.values()) == 1, "a sample was handed out twice for one task"
    failed_get_ids = [i for ids, _, _ in ledger.failed_gets for i in ids]
    assert collections.Counter(ledger.consumed_ids) + collections.Counter(failed_get_ids) == fetched
    resumed = set(pipeline.resumed_ids)
    assert len(resumed) == after_restart
    assert not resumed & set(failed_get_ids)
    assert resumed <= set(ledger.consumed_ids)
    for ids, error, seconds in ledger.failed_gets:
        # Dead unit: the timeout. Restarted (empty) unit: the data is gone.
        assert isinstance(error, (TimeoutError, KeyError)), repr(error)
        assert seconds <= CALL_TIMEOUT + MARGIN, f"a failed get_data took {seconds:.1f} s"
    assert observer.check_consumption_status("train", "train")


# ---- the controller dies and comes back from its checkpoint -----------------

def control_state(client) -> dict:
    """Everything the controller knows, as plain values."""
    state = {"partitions": sorted(client.get_partition_list())}
    for partition in state["partitions"]:
        everything = client.get_meta(["x"], 0, partition, mode="force_fetch")
        state[partition] = {
            "samples": list(zip(everything.global_indexes, ids_of(everything))),
            "produced": [a.tolist() for a in client.get_production_status(["x"], partition)],
            **{f"consumed by {task}": [a.tolist() for a in client.get_consumption_status(task, partition)]
               for task in ("a", "b")},
        }
    return state


def fetch_all(client, task: str, partition: str) -> list[int]:
    """Ids of every sample the task has not consumed yet, fetched PUT_SIZE at a time."""
    ids = []
    for _ in range(1000):  # bounded: a partition here holds far fewer batches
        if client.check_consumption_status(task, partition):
            return ids
        meta = client.get_meta(["x"], PUT_SIZE, partition, task_name=task, timeout=5.0)
        assert client.get_data(meta, format="numpy")["x"].tolist() == ids_of(meta)
        ids += ids_of(meta)
    raise AssertionError(f"task {task} never consumed all of {partition}")


def test_controller_restarted_from_its_checkpoint_serves_on_without_repeats(process_cluster, tmp_path):
    cluster = process_cluster(2)
    client = cluster.client(timeout=CALL_TIMEOUT)
    for start in range(0, 64, PUT_SIZE):
        put_ids(client, "train", range(start, start + PUT_SIZE))
    put_ids(client, "eval", range(100, 116))
    consumed_by_a = []
    for _ in range(3):
        consumed_by_a += ids_of(client.get_meta(["x"], PUT_SIZE, "train", task_name="a"))
    consumed_by_b = ids_of(client.get_meta(["x"], PUT_SIZE, "train", task_name="b"))
    before = control_state(client)
    checkpoint = tmp_path / "checkpoint"
    client.save_checkpoint(checkpoint)

    cluster.kill_controller()
    _, error, seconds = timed(client.get_partition_list)
    assert isinstance(error, TimeoutError), repr(error)
    assert seconds <= CALL_TIMEOUT + MARGIN, f"a call to the dead controller took {seconds:.1f} s"

    cluster.restart_controller("--load-checkpoint", str(checkpoint))
    # A new client waits until both storage units have registered again.
    fresh = cluster.client(timeout=20.0)
    assert control_state(fresh) == before
    assert control_state(client) == before  # the old client reconnects by itself

    # Task a goes on where it was: every sample once over the restart.
    rest_of_a = fetch_all(client, "a", "train")
    assert sorted(consumed_by_a + rest_of_a) == list(range(64))

    # New samples get indexes no live sample holds; old data stays intact.
    live_indexes = {index for index, _ in before["train"]["samples"] + before["eval"]["samples"]}
    put_ids(fresh, "train", range(64, 80))
    new = fresh.get_meta(["x"], 0, "train", mode="force_fetch").select_samples(list(range(64, 80)))
    assert ids_of(new) == list(range(64, 80)) and not set(new.global_indexes) & live_indexes
    everything = fresh.get_meta(["x"], 0, "train", mode="force_fetch")
    assert fresh.get_data(everything, format="numpy")["x"].tolist() == ids_of(everything)

    rest_of_b = fetch_all(fresh, "b", "train")
    assert sorted(consumed_by_b + rest_of_b) == list(range(80))
    assert sorted(fetch_all(fresh, "a", "train")) == list(range(64, 80))

    # The restarted controller knows the units again: a clear drops the data.
    assert fresh.stats()["samples"] == 96
    fresh.clear_partition("eval")
    assert fresh.stats()["samples"] == 80


# ---- malformed traffic from a peer that is not a seqflow client ---------------

MAX_REQUEST_BYTES = 64 * 1024
ZMQ_MESSAGE_LIMIT = MAX_REQUEST_BYTES + (1 << 20)  # the service's max_request_bytes plus its 1 MiB slack
OK, INVALID_ARGUMENT, NOT_FOUND = 0, 1, 2  # reply status byte: 0, or 1 + seqflow::ErrorCode
WIRE_PROTOCOL = seqflow._seqflow.limits.WIRE_PROTOCOL_VERSION


def packed(value) -> bytes:
    """MessagePack of the bytes, str, int, bool, list and dict values request headers hold."""
    if isinstance(value, bool):
        return b"\xc3" if value else b"\xc2"
    if isinstance(value, int):
        return b"\xd3" + struct.pack(">q", value)
    if isinstance(value, bytes):
        return b"\xc6" + struct.pack(">I", len(value)) + value
    if isinstance(value, str):
        raw = value.encode()
        return b"\xdb" + struct.pack(">I", len(raw)) + raw
    if isinstance(value, list):
        return b"\xdd" + struct.pack(">I", len(value)) + b"".join(packed(v) for v in value)
    return b"\xdf" + struct.pack(">I", len(value)) + b"".join(packed(k) + packed(v) for k, v in value.items())


def envelope(request_id: int, op: bytes) -> bytes:
    """The request envelope: an 8-byte little-endian id, then the op name."""
    return struct.pack("<Q", request_id) + op


# name: (frames, with the op after the envelope's id; the reply status; a
# word the error message must hold, naming what was wrong)
MALFORMED_REQUESTS = {
    "an id without an op": ([b""], INVALID_ARGUMENT, "operation name"),
    "an op that is not UTF-8": ([b"\xff\xfeop"], INVALID_ARGUMENT, "UTF-8"),
    "an op name of 65 bytes": ([b"x" * 65], INVALID_ARGUMENT, "65 bytes"),
    "an unknown op": ([b"frobnicate"], NOT_FOUND, "frobnicate"),
    "no header frame": ([b"insert"], INVALID_ARGUMENT, "header frame"),
    "a header that is not MessagePack": ([b"get_meta", b"\xc1\x00garbage"], INVALID_ARGUMENT, "MessagePack"),
    "a header that is a list": ([b"insert", packed(["p", 8])], INVALID_ARGUMENT, "map"),
    "a header with an unknown field": ([b"insert", packed({"partition_id": "p", "count": 1, "x": 1})],
                                       INVALID_ARGUMENT, "unknown field"),
    "a count of the wrong type": ([b"insert", packed({"partition_id": "p", "count": "8"})], INVALID_ARGUMENT,
                                  "count"),
    "a negative count": ([b"insert", packed({"partition_id": "p", "count": -1})], INVALID_ARGUMENT, "count"),
    "a count of 2**62": ([b"insert", packed({"partition_id": "p", "count": 1 << 62})], INVALID_ARGUMENT,
                         "count"),
    "an array claiming 2**32-1 items": ([b"insert", b"\xdd\xff\xff\xff\xff\xc0"], INVALID_ARGUMENT,
                                        "MessagePack"),
    "a string claiming 4 GiB": ([b"insert", b"\x81\xdb\xff\xff\xff\xf0ab"], INVALID_ARGUMENT, "MessagePack"),
    "60000 nested arrays": ([b"insert", b"\x91" * 60_000 + b"\xc0"], INVALID_ARGUMENT, "deeper"),
    "10000 stray frames after a valid header": ([b"partition_list"] + [b"\x80"] * 10_000, OK, None),
    "indexes that are text": ([b"clear_samples", packed({"partition_id": "p", "indexes": "abc"})],
                              INVALID_ARGUMENT, "indexes"),
    "a request over max_request_bytes": ([b"insert", b"\x00" * (MAX_REQUEST_BYTES + 1)], INVALID_ARGUMENT,
                                         "max_request_bytes"),
    # A version the controller never drew would win over every later write of the field.
    "a write_version never handed out": ([b"mark_produced", packed({
        "partition_id": "p", "indexes": b"", "generations": b"", "fields": {}, "custom_meta": [],
        "write_version": 1 << 62})], INVALID_ARGUMENT, "never handed out"),
    "a negative write_version": ([b"mark_produced", packed({
        "partition_id": "p", "indexes": b"", "generations": b"", "fields": {}, "custom_meta": [],
        "write_version": -1})], INVALID_ARGUMENT, "write_version"),
    "a storage unit the controller does not expect": (
        [b"register_storage", packed({"endpoint": "tcp://127.0.0.1:1", "admin_token": "t", "protocol": WIRE_PROTOCOL})],
        INVALID_ARGUMENT, "cannot join"),
    "a storage unit of another seqflow version": (
        [b"register_storage", packed({"endpoint": "tcp://127.0.0.1:1", "admin_token": "t", "protocol": 0})],
        INVALID_ARGUMENT, "speaks wire protocol 0"),
    "a client of another seqflow version": (
        [b"hello", packed({"protocol": WIRE_PROTOCOL + 1})], INVALID_ARGUMENT,
        f"the client speaks wire protocol {WIRE_PROTOCOL + 1}"),
}


def test_malformed_traffic_gets_error_replies_and_the_controller_serves_on(process_cluster):
    zmq = require("zmq")
    cluster = process_cluster(1, "--max-request-bytes", str(MAX_REQUEST_BYTES))
    host, port = cluster.address.removeprefix("tcp://").rsplit(":", 1)
    client = cluster.client(timeout=10.0)
    put_ids(client, "p", range(PUT_SIZE))

    # Peers that send bytes that are not ZeroMQ (random, and a greeting with
    # nonsense lengths) and then stay connected while the rest runs.
    raw_peers = []
    for garbage in (os.urandom(4096), b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x01NULL" + os.urandom(64)):
        raw = socket.create_connection((host, int(port)), timeout=10)
        raw_peers.append(raw)
        try:
            raw.sendall(garbage)
        except OSError:
            pass  # the service closed the connection already: as good

    context = zmq.Context()
    try:
        peer = context.socket(zmq.DEALER)
        peer.setsockopt(zmq.LINGER, 0)
        peer.connect(cluster.address)
        peer.send(b"")  # an empty envelope: answered with request id 0
        for request_id, (frames, _, _) in enumerate(MALFORMED_REQUESTS.values(), start=1):
            first, *rest = frames
            peer.send_multipart([envelope(request_id, first), *rest])
        replies = {}
        for _ in range(len(MALFORMED_REQUESTS) + 1):
            assert peer.poll(10_000), f"no reply within 10 s; replies so far: {sorted(replies)}"
            status, *message = peer.recv_multipart()
            replies[struct.unpack("<Q", status[:8])[0]] = (status[8], message)
        assert replies[0][0] == INVALID_ARGUMENT
        for request_id, (name, (_, expected, word)) in enumerate(MALFORMED_REQUESTS.items(), start=1):
            got, message = replies[request_id]
            assert got == expected, f"{name}: status {got}, message {message}"
            if expected != OK:
                assert len(message) == 1 and word in message[0].decode(), f"{name}: {message}"

        # A frame over the transport's limit: ZeroMQ drops that connection.
        oversized = context.socket(zmq.DEALER)
        oversized.setsockopt(zmq.LINGER, 0)
        oversized.connect(cluster.address)
        oversized.send_multipart([envelope(1, b"insert"), b"\x00" * (ZMQ_MESSAGE_LIMIT + 1)])
        # ping is built in: answered by the I/O loop, so it shows the loop runs.
        peer.send(envelope(99, b"ping"))
        assert peer.poll(10_000), "ping got no reply after the oversized frame"
        assert peer.recv_multipart() == [envelope(99, b"\x00")]
        assert not oversized.poll(500), "the oversized request got a reply"
    finally:
        context.destroy(linger=0)

    try:
        assert cluster.controller.process.poll() is None, "the controller died"
        put_ids(client, "p", range(PUT_SIZE, 2 * PUT_SIZE))
        meta = client.get_meta(["x"], 2 * PUT_SIZE, "p", task_name="t")
        assert sorted(client.get_data(meta, format="numpy")["x"].tolist()) == list(range(2 * PUT_SIZE))
    finally:
        for raw in raw_peers:
            raw.close()


def test_a_peers_reclaim_unproduced_never_removes_produced_samples_whatever_it_names(process_cluster):
    """reclaim_unproduced (a failed kv_put's rollback) sent raw with hostile
    values: produced samples, indexes no sample has (2**62, -5), a partition
    that does not exist. It releases nothing of those; only samples nobody
    produced (a raw insert's) go, as clear_samples would let any client."""
    zmq = require("zmq")
    msgpack = require("msgpack")
    cluster = process_cluster(1)
    client = cluster.client(timeout=10.0)
    produced = put_ids(client, "p", range(4)).global_indexes
    context = zmq.Context()
    try:
        peer = context.socket(zmq.DEALER)
        peer.setsockopt(zmq.LINGER, 0)
        peer.connect(cluster.address)

        def call(request_id: int, op: bytes, header: dict):
            peer.send_multipart([envelope(request_id, op), packed(header)])
            assert peer.poll(10_000), f"{op!r} was not answered"
            status, *reply = peer.recv_multipart()
            assert status[8] == OK, reply
            return msgpack.unpackb(reply[0])

        def indexes(values) -> bytes:
            return struct.pack(f"<{len(values)}q", *values)

        inserted = call(1, b"insert", {"partition_id": "p", "count": 2, "budget_ms": 60_000})
        unproduced = sorted(struct.unpack(f"<{len(inserted['indexes']) // 8}q", inserted["indexes"]))
        assert len(unproduced) == 2 and not set(unproduced) & set(produced)
        hostile = {"produced samples": ("p", list(produced)), "indexes no sample has": ("p", [1 << 62, -5]),
                   "a partition that does not exist": ("nowhere", list(produced))}
        for request_id, (what, (partition, named)) in enumerate(hostile.items(), start=2):
            reply = call(request_id, b"reclaim_unproduced",
                         {"partition_id": partition, "indexes": indexes(named), "generations": b""})
            assert reply["released"] == b"", f"{what}: released {reply['released']!r}"
        reply = call(9, b"reclaim_unproduced", {"partition_id": "p", "indexes": indexes(unproduced + list(produced)),
                                                "generations": b""})
        released = list(struct.unpack(f"<{len(reply['released']) // 8}q", reply["released"]))
        assert released == unproduced, released
    finally:
        context.destroy(linger=0)
    indexes_now, produced_now = client.get_production_status(["x"], "p")
    assert sorted(indexes_now.tolist()) == sorted(produced) and bool(produced_now.all())
    meta = client.get_meta(["x"], 4, "p", task_name="t")
    assert sorted(client.get_data(meta, format="numpy")["x"].tolist()) == [0, 1, 2, 3]


def test_a_producer_that_dies_after_its_insert_leaves_nothing_a_finite_stream_waits_for(process_cluster):
    """A put's insert is a lease of its producer: one that inserts 3 samples
    and dies (here: a raw insert, then the socket closes) leaves them
    unproduced only until the lease (--insert-lease 1) runs out; then they
    are reclaimed, and a finite stream without total_samples ends with
    exactly the samples that were put."""
    zmq = require("zmq")
    torch = require("torch")  # noqa: F841 (StreamingDataset's data_format="numpy" still imports torch)
    from seqflow import StreamingDataset
    from test_streaming import run_ranks

    cluster = process_cluster(1, "--insert-lease", "1")
    client = cluster.client(timeout=10.0)
    client.put({"x": np.arange(4)}, partition_id="p", custom_meta=[{"id": i} for i in range(4)])
    context = zmq.Context()
    try:
        dying = context.socket(zmq.DEALER)
        dying.setsockopt(zmq.LINGER, 0)
        dying.connect(cluster.address)
        dying.send_multipart([envelope(1, b"insert"), packed({"partition_id": "p", "count": 3, "budget_ms": 60_000})])
        assert dying.poll(10_000), "the insert was not answered"
        status, *reply = dying.recv_multipart()
        assert status[8] == OK, reply
        dying.close()
    finally:
        context.term()
    indexes, produced = client.get_production_status(["x"], "p")
    assert len(indexes) == 7 and sum(produced) == 4, (indexes, produced)
    stream = StreamingDataset(partition_id="p", task_name="train", dp_rank=0, client=client, batch_size=2,
                              micro_batch_size=2, data_fields=["x"], should_check_consumption_status=True,
                              total_samples=None, empty_batch_sleep=0.05, data_format="numpy")
    [seen] = run_ranks([stream], timeout=30)
    assert sorted(seen) == [0, 1, 2, 3]
    # Read as soon as the stream ended: the orphaned samples were reclaimed
    # before its end. A stream that ended without waiting for them would
    # leave them listed, unproduced, until the lease runs out a second after
    # the insert.
    indexes, produced = client.get_production_status(["x"], "p")
    assert len(indexes) == 4 and all(produced), (indexes, produced)
