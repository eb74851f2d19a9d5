"""Remote mode with hosts really apart: the client, the controller and each
storage unit are `seqflow serve` processes and Python processes in their
own network namespaces (netns_harness), joined by veth links through a
bridge. Puts and gets cross the links over TCP (never the same-host memory
path); a unit's link cut during a put or a get fails the call in time and
leaves nothing half-committed; a relay that delays, closes or resets
connections mid-stream makes calls complete or fail clearly, and a retry
then succeeds with every sample once."""

from __future__ import annotations

import collections
import hashlib
import re
import time
import urllib.request
from contextlib import ExitStack

import numpy as np
import pytest

import seqflow
from netns_harness import HostsApart, NamespacesUnavailable, host_address

pytestmark = [pytest.mark.timeout(90), pytest.mark.alone]

# Two placement blocks a put, so that each of two units gets one block: 4 MiB
# of int32 rows a put, 2 MiB a unit.
ROWS = 2 * seqflow._seqflow.limits.PLACEMENT_BLOCK
WIDTH = 4 * 1024 * 1024 // (ROWS * 4)
PAYLOAD_BYTES = ROWS * WIDTH * 4
FAULT_TIMEOUT = 2.0  # the clients' timeout in the fault tests: short, so that a lost reply shows quickly
# A put and its rollback share one deadline, the rollback getting at least a
# floor of its own (docs/deployment.md: a put to a dead unit fails within about 1.25x
# the timeout); every failed call must end within that plus this margin (2
# shared cores, other processes running).
PUT_DEADLINE_SHARE = 1.25
MARGIN = 3.0
SLOW_LINK_BITS = 20_000_000  # a unit's 2 MiB take ~0.8 s: long enough to cut the link mid-transfer
RECOVERY_TIMEOUT = 20.0


@pytest.fixture
def hosts_apart():
    """make(units, relay=False) -> a started HostsApart; all torn down after the test."""
    with ExitStack() as stack:
        def make(units: int, relay: bool = False) -> HostsApart:
            try:
                return stack.enter_context(HostsApart(units, relay=relay))
            except NamespacesUnavailable as reason:
                pytest.skip(f"hosts apart need network namespaces: {reason}")

        yield make


# ---- what the agents run, in the client's (or a unit's) namespace ---------------

def payload_rows(ids) -> np.ndarray:
    """Each sample's payload row, made from its id alone."""
    ids = np.asarray(ids, dtype=np.int64)
    return ((ids[:, None] * 7919 + np.arange(WIDTH)) % (1 << 31)).astype(np.int32)


def row_digest(row: np.ndarray) -> str:
    return hashlib.blake2b(row.tobytes(), digest_size=8).hexdigest()


def connect(state: dict, address: str, timeout: float) -> None:
    state["client"] = seqflow.Client.remote(address, timeout=timeout)


def put_samples(state: dict, partition: str, ids: list[int]) -> list[int]:
    """Puts samples whose field x holds the id, payload its row, custom_meta
    {"id": id}; their global indexes."""
    meta = state["client"].put({"x": np.array(ids, dtype=np.int64), "payload": payload_rows(ids)},
                               partition_id=partition, custom_meta=[{"id": i} for i in ids])
    return list(meta.global_indexes)


def read_produced(state: dict, partition: str) -> dict:
    """Every produced sample of the partition and its data as the services
    hand them out, and every sample the controller holds (produced or not)."""
    client = state["client"]
    indexes, produced = client.get_production_status(["x", "payload"], partition)
    ready = set(indexes[produced].tolist())
    everything = client.get_meta(["x", "payload"], 0, partition, mode="force_fetch")
    keep = [k for k, index in enumerate(everything.global_indexes) if index in ready]
    meta = everything.select_samples(keep)
    data = client.get_data(meta, format="numpy")
    return {"all_indexes": indexes.tolist(), "indexes": list(meta.global_indexes),
            "meta_ids": [entry["id"] for entry in meta.custom_meta], "x": data["x"].tolist(),
            "digests": [row_digest(row) for row in data["payload"]],
            "production_complete": client.check_production_status(["x", "payload"], partition),
            "stored_samples": client.stats()["samples"]}


def kv_put_ids(state: dict, partition: str, keys: list[str], ids: list[int]) -> None:
    """kv_batch_put of field x (the id) under `keys`, tag {"id": id}."""
    state["client"].kv_batch_put(keys, partition, {"x": np.array(ids, dtype=np.int64)},
                                 tags=[{"id": i} for i in ids])


def kv_read(state: dict, partition: str) -> dict:
    """Every key of the partition with its tag and its x (None: x not produced)."""
    client = state["client"]
    listed = client.kv_list(partition).get(partition, {})
    keys = sorted(listed)
    _, produced = client.get_production_status(["x"], partition)
    values = client.kv_batch_get(keys, partition, format="numpy")["x"].tolist() if keys and produced.all() else None
    return {"keys": keys, "tags": [listed[key] for key in keys], "x": values}


def production_status(state: dict, partition: str) -> dict:
    """The controller's production status of x and payload, as lists."""
    indexes, produced = state["client"].get_production_status(["x", "payload"], partition)
    return {"indexes": indexes.tolist(), "produced": produced.tolist()}


def local_copy_metrics(state: dict, metrics_url: str) -> dict:
    """A unit's same-host counters: {"put": bytes, "get": bytes} copied through
    memory, "sessions": the local_copy_session requests it answered (clients
    asking where to open a same-host session)."""
    with urllib.request.urlopen(metrics_url, timeout=10) as reply:
        text = reply.read().decode()
    found = dict(re.findall(r'^seqflow_storage_local_copy_bytes_total\{direction="(\w+)"\} (\S+)$', text,
                            re.MULTILINE))
    sessions = re.search(r'^seqflow_requests_total\{op="local_copy_session"\} (\S+)$', text, re.MULTILINE)
    assert set(found) == {"put", "get"} and sessions, "the unit's metrics lack the local-copy counters"
    return {**{direction: float(value) for direction, value in found.items()}, "sessions": float(sessions.group(1))}


# ---- checks, in the test ---------------------------------------------------------

def expect_exactly(read: dict, ids) -> None:
    """The produced samples are `ids`, each once, with their own data, and
    the controller holds no other sample."""
    counts = collections.Counter(read["meta_ids"])
    duplicated = sorted(i for i, n in counts.items() if n > 1)
    assert not duplicated, f"samples produced more than once: {duplicated}"
    assert sorted(read["meta_ids"]) == sorted(ids), "the produced samples are not the ones put"
    assert read["x"] == read["meta_ids"], "field x does not hold the sample's own id"
    assert read["digests"] == [row_digest(row) for row in payload_rows(read["meta_ids"])], \
        "a payload row differs from the one put"
    leftover = sorted(set(read["all_indexes"]) - set(read["indexes"]))
    assert not leftover, f"samples {leftover} stay inserted and never produced"
    assert read["production_complete"]


def expect_clear_failure(outcome, call: str, limit: float) -> None:
    """The call failed with a timeout or connection error naming an endpoint, within `limit` s."""
    assert isinstance(outcome.error, (TimeoutError, ConnectionError)), f"{call}: {outcome.error!r}"
    assert "tcp://" in str(outcome.error), f"{call}: the error names no endpoint: {outcome.error}"
    assert outcome.seconds <= limit, f"{call} failed after {outcome.seconds:.1f} s (limit {limit:.1f} s)"


def wait_until_served(client, partition: str, read=read_produced) -> dict:
    """read (read_produced) once it succeeds: the services may need a few
    timeouts (TCP backs off while a link is down) before they answer again."""
    deadline = time.monotonic() + RECOVERY_TIMEOUT
    while True:
        outcome = client.start(read, partition=partition).outcome(FAULT_TIMEOUT * 3 + MARGIN)
        if outcome.error is None:
            return outcome.value
        if time.monotonic() > deadline:
            raise AssertionError(f"not served again within {RECOVERY_TIMEOUT} s: {outcome.error!r}")


# ---- a: across namespaces, the bytes go over TCP -----------------------------------

def test_puts_and_gets_across_namespaces_move_over_tcp_not_through_memory(hosts_apart):
    hosts = hosts_apart(2)
    address = hosts.start_services(metrics=True)
    client = hosts.agent("client")
    client.call(connect, 20, address=address, timeout=10.0)

    before = hosts.link_bytes("client")
    client.call(put_samples, 30, partition="p", ids=list(range(ROWS)))
    after_put = hosts.link_bytes("client")
    read = client.call(read_produced, 30, partition="p")
    after_get = hosts.link_bytes("client")
    expect_exactly(read, range(ROWS))
    # Every byte crossed the client's link: out with the put, back with the get.
    assert after_put["from"] - before["from"] >= PAYLOAD_BYTES
    assert after_get["to"] - after_put["to"] >= PAYLOAD_BYTES
    # Each unit holds 2 MiB, far above the 256 KiB from which a same-host
    # client copies through memory. The client asked each unit for its
    # session (local copy is on) but cannot reach the abstract socket from
    # another namespace, so no byte moved through memory.
    for unit in range(2):
        seen = client.call(local_copy_metrics, 20, metrics_url=hosts.metrics_url(unit))
        assert seen["sessions"] >= 1 and seen["put"] == seen["get"] == 0, seen

    # The control: a client in unit0's namespace does copy through memory
    # with unit0 (and over TCP with unit1), so the counters do see it.
    beside_unit0 = hosts.agent("unit0")
    beside_unit0.call(connect, 20, address=address, timeout=10.0)
    beside_unit0.call(put_samples, 30, partition="q", ids=list(range(ROWS)))
    expect_exactly(beside_unit0.call(read_produced, 30, partition="q"), range(ROWS))
    unit0_share = PAYLOAD_BYTES // 2
    copied = client.call(local_copy_metrics, 20, metrics_url=hosts.metrics_url(0))
    assert copied["put"] >= unit0_share and copied["get"] >= unit0_share, copied
    seen = client.call(local_copy_metrics, 20, metrics_url=hosts.metrics_url(1))
    assert seen["put"] == seen["get"] == 0, seen


# ---- b: a unit's link cut mid-transfer ----------------------------------------------

def two_units_holding_samples(hosts_apart):
    """Two units, a client (timeout FAULT_TIMEOUT) and ROWS samples in
    partition p: (hosts, the client's agent, the controller's address)."""
    hosts = hosts_apart(2)
    client = hosts.agent("client")
    address = hosts.start_services()
    client.call(connect, 20, address=address, timeout=FAULT_TIMEOUT)
    client.call(put_samples, 20, partition="p", ids=list(range(ROWS)))
    return hosts, client, address


def test_a_unit_link_cut_during_a_put_fails_in_time_and_commits_nothing(hosts_apart):
    hosts, client, _ = two_units_holding_samples(hosts_apart)

    hosts.rate_limit("unit0", SLOW_LINK_BITS)
    failing_ids = list(range(1000, 1000 + ROWS))
    put = client.start(put_samples, partition="p", ids=failing_ids)
    hosts.wait_for_link_bytes("unit0", "to", 256 * 1024, 20)  # the put is on its way to unit0
    hosts.link_down("unit0")
    outcome = put.outcome(60)
    expect_clear_failure(outcome, "the put", PUT_DEADLINE_SHARE * FAULT_TIMEOUT + MARGIN)
    assert host_address("unit0") in str(outcome.error), f"the error does not name unit0: {outcome.error}"
    # Still cut off: the controller holds none of the failed put's samples
    # (the client removed what it had inserted before it raised).
    status = client.call(production_status, 20, partition="p")
    assert status == {"indexes": list(range(ROWS)), "produced": [True] * ROWS}

    hosts.link_up("unit0")
    hosts.rate_limit("unit0", None)
    expect_exactly(wait_until_served(client, "p"), range(ROWS))
    # The put request cut off in flight reached unit0 once the link came
    # back, past its deadline: it must not have landed, neither as data of
    # its own (the units' sample count) nor over new samples that got its
    # indexes again (their values).
    client.call(put_samples, 20, partition="p", ids=failing_ids)
    read = client.call(read_produced, 20, partition="p")
    expect_exactly(read, [*range(ROWS), *failing_ids])
    assert read["stored_samples"] == 2 * ROWS, "the units hold data no produced sample owns"


def test_a_unit_link_cut_during_a_get_fails_in_time_and_the_unit_serves_again(hosts_apart):
    hosts, client, _ = two_units_holding_samples(hosts_apart)

    hosts.rate_limit("unit0", SLOW_LINK_BITS)
    get = client.start(read_produced, partition="p")
    hosts.wait_for_link_bytes("unit0", "from", 256 * 1024, 20)  # unit0's reply is on its way
    hosts.link_down("unit0")
    outcome = get.outcome(60)
    expect_clear_failure(outcome, "the get", FAULT_TIMEOUT + MARGIN)
    assert host_address("unit0") in str(outcome.error), f"the error does not name unit0: {outcome.error}"

    hosts.link_up("unit0")
    hosts.rate_limit("unit0", None)
    expect_exactly(wait_until_served(client, "p"), range(ROWS))
    client.call(put_samples, 20, partition="p", ids=list(range(1000, 1000 + ROWS)))
    expect_exactly(client.call(read_produced, 20, partition="p"), [*range(ROWS), *range(1000, 1000 + ROWS)])


# ---- c: a relay that delays, closes and resets connections ----------------------------

RELAY_DELAY = 0.03  # one way, each chunk


def test_puts_and_gets_through_a_delaying_relay_complete_correctly(hosts_apart):
    hosts = hosts_apart(2, relay=True)
    client = hosts.agent("client")
    client.call(connect, 20, address=hosts.start_services(), timeout=10.0)
    hosts.relay.delay(RELAY_DELAY)

    put = client.start(put_samples, partition="p", ids=list(range(ROWS))).outcome(30)
    assert put.error is None, repr(put.error)
    # The insert, the units' writes and mark_produced: three round trips at least.
    assert put.seconds >= 3 * 2 * RELAY_DELAY, f"the put took {put.seconds:.3f} s: the delay was not in its path"
    read = client.start(read_produced, partition="p").outcome(30)
    assert read.error is None, repr(read.error)
    expect_exactly(read.value, range(ROWS))
    routes = hosts.relay.stats()
    for unit in ("unit0", "unit1"):  # each unit's half went through the relay both ways
        assert min(routes[unit]["bytes"].values()) >= PAYLOAD_BYTES // 2, routes[unit]


MID_STREAM = {"pass_bytes": 512 * 1024}  # of the 2 MiB a unit's put request or get reply carries

# id: (route, direction, how, budget, the call cut, the request its error names)
CUTS = {
    "unit put request reset": ("unit0", "up", "reset", MID_STREAM, "put", "put"),
    "unit put request closed": ("unit0", "up", "close", MID_STREAM, "put", "put"),
    "unit get reply reset": ("unit0", "down", "reset", MID_STREAM, "get", "get"),
    "unit get reply closed": ("unit0", "down", "close", MID_STREAM, "get", "get"),
    # A put speaks to the controller twice: insert, then mark_produced once
    # the units hold the data; each message is one chunk through the relay.
    "insert request reset": ("controller", "up", "reset", {"pass_chunks": 0}, "put", "insert"),
    "mark_produced request reset": ("controller", "up", "reset", {"pass_chunks": 1}, "put", "mark_produced"),
    "mark_produced reply reset": ("controller", "down", "reset", {"pass_chunks": 1}, "put", "mark_produced"),
    "insert reply reset": ("controller", "down", "reset", {"pass_chunks": 0}, "put", "insert"),
}
# The insert reply lost, the client does not know the samples it inserted
# and cannot remove them: the controller reclaims them once the put's lease
# runs out (docs/deployment.md: the put's own timeout plus 2 s). After any other cut
# the failed put has removed its unproduced samples itself before it raised.
INSERT_LEASE = FAULT_TIMEOUT + 2.0


def without_unproduced(client, partition: str, reclaimed_by_lease: bool) -> dict:
    """read_produced once the partition holds no unproduced sample: at once,
    or by the end of the lease when only the lease can reclaim them."""
    deadline = time.monotonic() + (INSERT_LEASE + MARGIN if reclaimed_by_lease else 0)
    while True:
        read = client.call(read_produced, 20, partition=partition)
        if set(read["all_indexes"]) == set(read["indexes"]) or time.monotonic() > deadline:
            return read
        time.sleep(0.1)


@pytest.mark.parametrize("route, direction, how, budget, call, cut_request",
                         [pytest.param(*cut, id=name) for name, cut in CUTS.items()])
def test_a_connection_cut_mid_call_fails_clearly_and_a_retry_leaves_every_sample_once(
        hosts_apart, route, direction, how, budget, call, cut_request):
    hosts = hosts_apart(2, relay=True)
    client = hosts.agent("client")
    client.call(connect, 20, address=hosts.start_services(), timeout=FAULT_TIMEOUT)
    expected = list(range(ROWS))
    client.call(put_samples, 20, partition="p", ids=expected)

    cuts = hosts.relay.stats()[route]["cuts"]
    hosts.relay.cut(route, how, direction, **budget)
    new_ids = list(range(1000, 1000 + ROWS))
    if call == "put":
        outcome = client.start(put_samples, partition="p", ids=new_ids).outcome(60)
        limit = PUT_DEADLINE_SHARE * FAULT_TIMEOUT + MARGIN
    else:
        outcome = client.start(read_produced, partition="p").outcome(60)
        limit = FAULT_TIMEOUT + MARGIN
    assert hosts.relay.stats()[route]["cuts"] == cuts + 1, "the relay did not cut the connection"

    committed = (cut_request, direction) == ("mark_produced", "down")
    if committed:
        # The controller committed the put; only the reply was lost. The put
        # finds its samples produced instead of removing them (a consumer may
        # have fetched them already) and succeeds: a retry would put them
        # twice. Only a rollback the controller did not answer in time (a
        # loaded machine) leaves the caller a "may have landed" error.
        assert outcome.error is None or "the put may have landed" in str(outcome.error), \
            f"a put whose commit landed raised: {outcome.error}"
    if outcome.error is None or committed:  # it completed despite the cut: then all of it
        if call == "put":
            expected += new_ids
        else:
            expect_exactly(outcome.value, expected)
    else:
        expect_clear_failure(outcome, call, limit)
        assert f"'{cut_request}'" in str(outcome.error), f"the cut hit another request: {outcome.error}"
        # Nothing of a failed put stays; a get reads again on a connection made anew.
        expect_exactly(without_unproduced(client, "p", reclaimed_by_lease=cut_request == "insert"), expected)
        if call == "put":  # the retry
            client.call(put_samples, 20, partition="p", ids=new_ids)
            expected += new_ids
    read = client.call(read_produced, 20, partition="p")
    expect_exactly(read, expected)
    assert read["stored_samples"] == len(expected), "the units hold data no produced sample owns"


def test_a_kv_put_whose_commit_reply_is_lost_keeps_what_landed_and_a_retry_overwrites_it(hosts_apart):
    """The reply of the kv_put's commit (mark_produced) is reset after the
    controller committed: the put raises, yet its write landed, so the keys it
    made stay with their values and tags (its rollback releases only keys
    nothing was produced in); a retry overwrites them, each key once."""
    hosts = hosts_apart(2, relay=True)
    client = hosts.agent("client")
    client.call(connect, 20, address=hosts.start_services(), timeout=FAULT_TIMEOUT)
    keys = [f"k{i}" for i in range(8)]
    client.call(kv_put_ids, 20, partition="kv", keys=["warm"], ids=[0])  # the connections exist before the cut

    # Replies on the controller connection: kv_resolve's, sample_production's, then mark_produced's.
    cuts = hosts.relay.stats()["controller"]["cuts"]
    hosts.relay.cut("controller", "reset", "down", pass_chunks=2)
    outcome = client.start(kv_put_ids, partition="kv", keys=keys, ids=list(range(1, 9))).outcome(60)
    assert hosts.relay.stats()["controller"]["cuts"] == cuts + 1, "the relay did not cut the connection"
    expect_clear_failure(outcome, "kv_put", PUT_DEADLINE_SHARE * FAULT_TIMEOUT + MARGIN)
    assert "'mark_produced'" in str(outcome.error), f"the cut hit another request: {outcome.error}"

    landed = wait_until_served(client, "kv", read=kv_read)
    assert landed["keys"] == sorted(keys + ["warm"]), "the rollback released keys whose write had landed"
    assert landed["x"] == [1, 2, 3, 4, 5, 6, 7, 8, 0]
    assert landed["tags"] == [{"id": i} for i in range(1, 9)] + [{"id": 0}]

    client.call(kv_put_ids, 20, partition="kv", keys=keys, ids=list(range(11, 19)))  # the retry
    again = client.call(kv_read, 20, partition="kv")
    assert again["keys"] == sorted(keys + ["warm"])
    assert again["x"] == list(range(11, 19)) + [0]


def test_connections_reset_while_idle_are_made_again_and_the_next_calls_succeed(hosts_apart):
    hosts = hosts_apart(2, relay=True)
    client = hosts.agent("client")
    client.call(connect, 20, address=hosts.start_services(), timeout=FAULT_TIMEOUT)
    client.call(put_samples, 20, partition="p", ids=list(range(ROWS)))

    before = hosts.relay.stats()
    for route in before:
        assert hosts.relay.cut_all(route, "reset") >= 1, f"no connection of {route} was open"
    deadline = time.monotonic() + 10
    while not all(now["accepted"] > before[route]["accepted"] for route, now in hosts.relay.stats().items()):
        assert time.monotonic() < deadline, f"not every route was connected again: {hosts.relay.stats()}"
        time.sleep(0.01)
    # Reconnected: the first calls succeed, without a timeout first.
    client.call(put_samples, 20, partition="p", ids=list(range(1000, 1000 + ROWS)))
    expect_exactly(client.call(read_produced, 20, partition="p"), [*range(ROWS), *range(1000, 1000 + ROWS)])


# ---- a clear while a unit is cut off ------------------------------------------------

def clear_partition(state: dict, partition: str) -> None:
    state["client"].clear_partition(partition)


def partitions(state: dict) -> list[str]:
    return state["client"].get_partition_list()


def stored_samples(state: dict) -> int:
    """Samples the units hold, all of them answering."""
    return state["client"].stats()["samples"]


def test_a_clear_while_a_unit_is_cut_off_is_dropped_there_once_it_is_back(hosts_apart):
    """The controller cannot drop the cleared samples' data on a unit whose
    link is down: the unit owes the drop, which reaches it (by generation)
    when it registers again, so no cleared data stays on it."""
    hosts, client, address = two_units_holding_samples(hosts_apart)
    assert client.call(stored_samples, 20) == ROWS

    # A patient client: its clear returns once the controller has given up
    # dropping on unit0 (at most 5 s), which then owes the drop.
    patient = hosts.agent("client")
    patient.call(connect, 20, address=address, timeout=20.0)
    hosts.link_down("unit0")
    patient.call(clear_partition, 30, partition="p")
    assert client.call(partitions, 20) == []
    hosts.link_up("unit0")

    deadline = time.monotonic() + RECOVERY_TIMEOUT
    while True:
        outcome = client.start(stored_samples).outcome(FAULT_TIMEOUT * 3 + MARGIN)
        if outcome.error is None and outcome.value == 0:
            break
        assert time.monotonic() < deadline, f"unit0 still holds cleared data: {outcome.value or outcome.error!r}"
        time.sleep(0.2)
    # Indexes reused by new samples keep their data.
    client.call(put_samples, 20, partition="p", ids=list(range(1000, 1000 + ROWS)))
    expect_exactly(client.call(read_produced, 20, partition="p"), range(1000, 1000 + ROWS))
