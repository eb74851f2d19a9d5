"""Storage capacity and back-pressure: limits overall and per partition,
when_full ("raise" | "wait"), high and low watermarks, metrics, bad values.
Waiting puts run in real threads, embedded and remote (in-process services,
and `seqflow serve` processes); every wait has a deadline."""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from typing import Callable

import numpy as np
import pytest

import seqflow
from remote_services import LOCAL, clusters, client_mode  # noqa: F401
from seqflow import Client
from seqflow._capacity import unit_share

PATIENCE = 30.0  # every wait's deadline in these tests


def metric(url: str, name: str) -> float:
    """The value of an unlabelled metric at a metrics endpoint."""
    with urllib.request.urlopen(url, timeout=PATIENCE) as reply:
        match = re.search(rf"^{name} (\S+)$", reply.read().decode(), re.M)
    assert match, f"{url} reports no {name}"
    return float(match.group(1))


def unit_full_answers(metrics_url: str) -> Callable[[], float]:
    """The "no room" answers a storage unit gave waiting puts so far, read from its metrics."""
    return lambda: metric(metrics_url, "seqflow_storage_full_answers_total")


def embedded_full_answers(c: Client) -> Callable[[], float]:
    return lambda: c.capacity_stats()["full_answers"]


class Maker:
    """make(timeout=PATIENCE, **capacity): a client whose storage (one in-process unit when remote) has
    `capacity` (seqflow.Client's capacity arguments); full_answers(client): its storage's "no room"
    answers to waiting puts so far."""

    def __init__(self, client_mode: str, clusters):  # noqa: F811
        self.client_mode, self.clusters = client_mode, clusters
        self.made: list[Client] = []
        self.answers: dict[int, Callable[[], float]] = {}

    def __call__(self, *, timeout: float = PATIENCE, **capacity) -> Client:
        if self.client_mode == "embedded":
            client = Client(polling_mode=True, timeout=timeout, **capacity)
            self.answers[id(client)] = embedded_full_answers(client)
        else:
            cluster = self.clusters(1, controller_args={"polling_mode": True},
                                    storage_args={**capacity, "metrics": "127.0.0.1:0"})
            client = cluster.client(polling_mode=True, timeout=timeout)
            self.answers[id(client)] = unit_full_answers(f"http://127.0.0.1:{cluster.units[0].metrics_port}/metrics")
        self.made.append(client)
        return client

    def full_answers(self, client: Client) -> Callable[[], float]:
        return self.answers[id(client)]


@pytest.fixture
def make_client(client_mode, clusters):  # noqa: F811
    maker = Maker(client_mode, clusters)
    yield maker
    for client in maker.made:
        client.close()


class PutThread(threading.Thread):
    """A put in its own thread; join_put re-raises what it raised."""

    def __init__(self, client: Client, data: dict, partition_id: str):
        super().__init__(daemon=True)
        self.client, self.data, self.partition_id = client, data, partition_id
        self.error: BaseException | None = None
        self.meta = None
        self.start()

    def run(self) -> None:
        try:
            self.meta = self.client.put(self.data, partition_id=self.partition_id)
        except BaseException as error:  # handed to the test's thread
            self.error = error

    def join_put(self):
        self.join(PATIENCE)
        assert not self.is_alive(), f"the put did not return within {PATIENCE} s"
        if self.error is not None:
            raise self.error
        return self.meta

    def until_told_no_room(self, full_answers: Callable[[], float], before: float = 0) -> None:
        """Waits (deadline PATIENCE) until the storage told a waiting put "no room" more than `before`
        times in all: this put waits now (with one put waiting, it is this one)."""
        deadline = time.monotonic() + PATIENCE
        while full_answers() <= before:
            assert self.is_alive(), f"the put returned without waiting: {self.error!r}"
            assert time.monotonic() < deadline, f"the put was not told to wait within {PATIENCE} s"
            time.sleep(0.001)


def values_of(c: Client, partition_id: str, count: int) -> list[int]:
    """The x of `count` ready samples of the partition, fetched once by a fresh task, which then finds
    no more ready."""
    task = f"reader_{partition_id}"
    values = []
    if count:
        meta = c.get_meta(["x"], count, partition_id, task_name=task, polling=True)
        values = sorted(np.asarray(c.get_data(meta)["x"]).reshape(-1).tolist())
    assert c.get_meta(["x"], 1, partition_id, task_name=task, polling=True).size == 0
    return values


def clear_some(c: Client, partition_id: str, count: int) -> None:
    meta = c.get_meta(["x"], count, partition_id, task_name="consumer", polling=True)
    assert meta.size == count
    c.clear_samples(meta)


def check_a_waiting_put_resumes_when_a_clear_makes_room(c: Client, full_answers: Callable[[], float]) -> None:
    """c's storage holds 4 samples and waits when full."""
    c.put({"x": np.arange(4)}, partition_id="p")
    put = PutThread(c, {"x": np.arange(100, 102)}, "p")
    put.until_told_no_room(full_answers)
    clear_some(c, "p", 2)  # the same client: the waiting put holds none of its locks
    meta = put.join_put()
    assert meta.size == 2
    assert values_of(c, "p", 4) == [2, 3, 100, 101]  # each sample once: none lost, none twice


def test_a_waiting_put_resumes_when_a_clear_makes_room_and_lands_once(make_client):
    c = make_client(max_samples=4, when_full="wait")
    check_a_waiting_put_resumes_when_a_clear_makes_room(c, make_client.full_answers(c))


def test_a_waiting_put_resumes_with_seqflow_serve_processes(clusters):  # noqa: F811
    cluster = clusters(1, processes=True, controller_args={"polling_mode": True},
                       storage_args={"max_samples": 4, "when_full": "wait", "low_watermark": 1,
                                     "metrics": "127.0.0.1:0"})
    c = cluster.client(polling_mode=True, timeout=PATIENCE)
    try:
        answers = unit_full_answers(cluster.units[0].metrics_url + "/metrics")
        check_a_waiting_put_resumes_when_a_clear_makes_room(c, answers)
    finally:
        c.close()


def test_a_waiting_put_raises_at_its_deadline_saying_it_waited(make_client):
    c = make_client(max_samples=2, when_full="wait", timeout=0.5)
    c.put({"x": np.arange(2)}, partition_id="p")
    with pytest.raises(ValueError, match=r"storage full: max_samples is 2.*needs 1 new samples.*waited"):
        c.put({"x": np.arange(10, 11)}, partition_id="p")
    assert values_of(c, "p", 2) == [0, 1]  # the refused put left nothing behind


def test_raise_mode_refuses_at_once_without_waiting(make_client):
    c = make_client(max_samples=2)
    c.put({"x": np.arange(2)}, partition_id="p")
    with pytest.raises(ValueError, match="storage full: max_samples is 2") as refused:
        c.put({"x": np.arange(10, 11)}, partition_id="p")
    assert "waited" not in str(refused.value)
    assert values_of(c, "p", 2) == [0, 1]


@pytest.mark.parametrize("when_full", ["raise", "wait"])
def test_per_partition_limits_count_each_partition(make_client, when_full):
    c = make_client(max_samples_per_partition=2, when_full=when_full, timeout=0.5)
    c.put({"x": np.arange(2)}, partition_id="a")
    c.put({"x": np.arange(10, 12)}, partition_id="b")  # b has its own room
    with pytest.raises(ValueError, match="max_samples_per_partition is 2 for partition 'a'"):
        c.put({"x": np.arange(5, 6)}, partition_id="a")
    clear_some(c, "a", 1)
    c.put({"x": np.arange(5, 6)}, partition_id="a")
    assert values_of(c, "a", 2) == [1, 5] and values_of(c, "b", 2) == [10, 11]


def test_per_partition_wait_resumes_when_its_partition_is_cleared(make_client):
    c = make_client(max_samples_per_partition=2, when_full="wait")
    c.put({"x": np.arange(2)}, partition_id="a")
    put = PutThread(c, {"x": np.arange(7, 8)}, "a")
    put.until_told_no_room(make_client.full_answers(c))
    c.put({"x": np.arange(10, 12)}, partition_id="b")  # another partition is not held up
    clear_some(c, "a", 1)
    put.join_put()
    assert values_of(c, "a", 2) == [1, 7]


def test_watermarks_cap_puts_and_resume_them_with_hysteresis(make_client):
    c = make_client(max_samples=10, high_watermark=0.8, low_watermark=0.5)
    c.put({"x": np.arange(8)}, partition_id="p")
    with pytest.raises(ValueError, match=r"max_samples is 10 \(high watermark 0.8: 8\)"):
        c.put({"x": np.arange(8, 9)}, partition_id="p")
    clear_some(c, "p", 2)  # 6 held: below high, above low
    with pytest.raises(ValueError, match=r"filled up.*low watermark 0.5 \(5\)"):
        c.put({"x": np.arange(8, 9)}, partition_id="p")
    clear_some(c, "p", 1)  # 5 held: puts resume
    c.put({"x": np.arange(8, 11)}, partition_id="p")
    assert values_of(c, "p", 8) == [3, 4, 5, 6, 7, 8, 9, 10]


def test_a_put_larger_than_the_limit_raises_at_once_in_wait_mode(make_client):
    c = make_client(max_samples=2, when_full="wait", timeout=PATIENCE)
    with pytest.raises(ValueError, match="never fits"):
        c.put({"x": np.arange(3)}, partition_id="p")
    assert values_of(c, "p", 0) == []


def test_config_keys_set_the_capacity_of_an_embedded_client():
    config = {"storage": {"max_samples_per_partition": 1, "when_full": "wait", "high_watermark": 1.0,
                          "low_watermark": 1.0, "max_samples": 10, "max_bytes_per_partition": 0},
              "controller": {"timeout": 0.3, "polling_mode": True}}
    c = Client.from_config(config)
    try:
        c.put({"x": np.arange(1)}, partition_id="p")
        with pytest.raises(ValueError, match="max_samples_per_partition is 1 for partition 'p'.*waited"):
            c.put({"x": np.arange(1)}, partition_id="p")
    finally:
        c.close()


def test_transfer_queue_total_storage_size_stays_a_sample_cap_that_raises():
    c = Client.from_config({"backend": {"SimpleStorage": {"total_storage_size": 2}},
                            "storage": {"when_full": "raise"}})
    try:
        c.put({"x": np.arange(2)}, partition_id="p")
        with pytest.raises(ValueError, match="storage full: max_samples is 2"):
            c.put({"x": np.arange(1)}, partition_id="p")
    finally:
        c.close()


@pytest.mark.parametrize("arguments, message", [
    ({"high_watermark": 1.5}, r"high_watermark must be in \(0, 1\].*got 1.5"),
    ({"high_watermark": 0}, r"high_watermark must be in \(0, 1\].*got 0"),
    ({"low_watermark": 0.9, "high_watermark": 0.8}, r"low_watermark must not exceed high_watermark \(0.8\), got 0.9"),
    ({"low_watermark": -1}, r"low_watermark must be in \(0, 1\].*got -1"),
    ({"when_full": "block"}, r"when_full must be one of \('raise', 'wait'\), got 'block'"),
    ({"max_samples_per_partition": -1}, "max_samples_per_partition must be >= 0, got -1"),
    ({"max_bytes_per_partition": 2**64}, "max_bytes_per_partition must be <= 9223372036854775807"),
])
def test_bad_capacity_values_are_refused_naming_them(client_mode, arguments, message):  # noqa: F811
    with pytest.raises(ValueError, match=message):
        if client_mode == "embedded":
            Client(**arguments)
        else:  # refused before the unit registers anywhere
            seqflow.serve_storage("tcp://127.0.0.1:9", LOCAL, **arguments)


@pytest.mark.parametrize("config, error, message", [
    ({"storage": {"when_full": "later"}}, ValueError, "storage.when_full must be one of"),
    ({"storage": {"high_watermark": "high"}}, TypeError, "storage.high_watermark must be a number, got str 'high'"),
    ({"storage": {"low_watermark": True}}, TypeError, "storage.low_watermark must be a number"),
    ({"storage": {"max_samples_per_partition": 1.5}}, TypeError, "storage.max_samples_per_partition must be an int"),
    ({"storage": {"low_watermark": 0.9, "high_watermark": 0.5}}, ValueError, "low_watermark must not exceed"),
])
def test_bad_capacity_config_keys_are_refused_naming_them(config, error, message):
    with pytest.raises(error, match=message):
        Client.from_config(config).close()


def test_storage_metrics_report_limits_usage_and_waiting_puts(clusters):  # noqa: F811
    cluster = clusters(1, storage_args=dict(max_samples=2, max_samples_per_partition=2, when_full="wait",
                                            high_watermark=1.0, low_watermark=0.5, metrics="127.0.0.1:0"))
    unit = cluster.units[0]
    c = cluster.client(polling_mode=True, timeout=PATIENCE)
    try:
        c.put({"x": np.arange(2)}, partition_id="p")
        put = PutThread(c, {"x": np.arange(5, 6)}, "p")
        put.until_told_no_room(unit_full_answers(f"http://127.0.0.1:{unit.metrics_port}/metrics"))
        clear_some(c, "p", 1)
        put.join_put()
        with urllib.request.urlopen(f"http://127.0.0.1:{unit.metrics_port}/metrics", timeout=PATIENCE) as reply:
            text = reply.read().decode()
    finally:
        c.close()
    lines = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
             if line and not line.startswith("#")}
    assert lines['seqflow_storage_limit{limit="max_samples"}'] == 2
    assert lines['seqflow_storage_limit{limit="max_samples_per_partition"}'] == 2
    assert lines['seqflow_storage_limit{limit="max_bytes"}'] == 0
    assert lines['seqflow_storage_watermark{level="high"}'] == 1.0
    assert lines['seqflow_storage_watermark{level="low"}'] == 0.5
    assert lines["seqflow_storage_wait_when_full"] == 1
    assert lines['seqflow_storage_partition_samples{partition="p"}'] == 2
    assert lines["seqflow_storage_samples"] == 2
    assert lines["seqflow_storage_puts_waited_total"] >= 1  # the places given to waiting puts
    assert lines["seqflow_storage_puts_refused_total"] == 0
    assert lines["seqflow_storage_full_answers_total"] >= 1
    assert lines["seqflow_storage_waiting_puts"] == 0


def test_a_units_share_divides_the_total_limits_only():
    # Per-partition limits stay whole on each unit: one partition's samples may all lie on one unit.
    settings = {"max_samples": 5, "max_bytes": 0, "max_samples_per_partition": 3, "max_bytes_per_partition": 7,
                "when_full": "wait", "high_watermark": 0.9, "checkpoint_root": "/tmp/x"}
    share = unit_share(settings, 2)
    assert share == {**settings, "max_samples": 3}  # 5 / 2 rounded up; 0 (no limit) stays 0
    assert unit_share(settings, 1) == settings
