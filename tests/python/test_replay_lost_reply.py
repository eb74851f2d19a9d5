"""A replay pass whose reply is lost, against real `seqflow serve` processes
with a TCP relay (tcp_relay.py) in front of the controller: the verl drop-in
sends the pass again under its pass id and gets the same groups, once; a
trainer that dies before acknowledging its pass has its groups served again
once the pass's lease ends."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import seqflow
from netns_harness import LineReader, stop_child
from remote_services import clusters  # noqa: F401 (fixture)
from seqflow.compat.verl import ReplayBufferAsync

pytestmark = pytest.mark.timeout(90)

HERE = Path(__file__).resolve().parent
STARTUP_TIMEOUT = 20.0
CLIENT_TIMEOUT = 2.0  # short: a reply the relay cut shows quickly


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalRelay:
    """tcp_relay.py on loopback, one route "controller" to `target_port`."""

    def __init__(self, target_port: int):
        port = free_port()
        self.address = f"tcp://127.0.0.1:{port}"
        self.process = subprocess.Popen([sys.executable, "-u", str(HERE / "tcp_relay.py"),
                                         f"controller=127.0.0.1:{port}>127.0.0.1:{target_port}"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.lines = LineReader(self.process, "the relay", None)
        try:
            self.lines.read(STARTUP_TIMEOUT)
        except BaseException:
            self.close()
            raise

    def command(self, **request) -> dict:
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()
        reply = self.lines.read(STARTUP_TIMEOUT)
        assert "error" not in reply, f"the relay refused {request}: {reply}"
        return reply["ok"]

    def cuts(self) -> int:
        return self.command(op="stats")["controller"]["cuts"]

    def close(self) -> None:
        assert not stop_child(self.process, "the relay")


@pytest.fixture
def relayed(clusters):  # noqa: F811
    """A cluster of `seqflow serve` processes and a relay in front of its controller."""
    cluster = clusters(1, processes=True)
    relay = LocalRelay(int(cluster.address.rsplit(":", 1)[1]))
    yield cluster, relay
    relay.close()


def _group(client, uid: str, step: int) -> None:
    client.kv_put(uid, "train", tag={"is_prompt": True, "status": "finished", "global_steps": step})
    client.kv_batch_put([f"{uid}_0_0", f"{uid}_1_0"], "train", tags=[{"reward": 0.0}, {"reward": 1.0}])


def _buffer(client) -> ReplayBufferAsync:
    return ReplayBufferAsync("async", {}, None, "drop", {}, poll_interval=0.01, client=client)


def test_a_sample_whose_reply_is_lost_yields_the_same_groups_once(relayed):
    cluster, relay = relayed
    client = seqflow.Client.remote(relay.address, timeout=CLIENT_TIMEOUT)
    for uid, step in (("a", 1), ("b", 2), ("c", 3)):
        _group(client, uid, step)
    buffer = _buffer(client)
    cuts = relay.cuts()
    # The first reply down is the drop-in's watch starting; the next, its pass's, is cut.
    relay.command(op="cut", route="controller", how="reset", direction="down", pass_bytes=None, pass_chunks=1)
    batch, _ = buffer.sample(3, "train", 1)  # its first reply is cut; the pass is sent again
    assert relay.cuts() == cuts + 1, "the relay did not cut the reply"
    assert batch.keys == ["a_0_0", "a_1_0"], "the retry got another pass's groups"
    listed = client.kv_list("train")["train"]
    assert "a" not in listed and {"b", "c", "a_0_0", "a_1_0"} <= set(listed)
    batch, _ = buffer.sample(3, "train", 2)
    assert batch.keys == ["b_0_0", "b_1_0", "c_0_0", "c_1_0"]  # nothing served twice, nothing orphaned
    assert sorted(client.kv_list("train")["train"]) == sorted(f"{u}_{s}_0" for u in "abc" for s in (0, 1))
    client.close()


def test_a_selection_never_acknowledged_is_sampled_again_after_its_lease(clusters):  # noqa: F811
    client = clusters(1, processes=True).client()
    _group(client, "a", 1)
    _group(client, "b", 2)
    died = client.replay_pass("train", 3, 1, pass_id=123, lease=0.2)  # a trainer that dies with this answer
    assert died.kept and died.selected_uids == ["a"]
    assert "a" in client.kv_list("train")["train"]  # held, not cleared
    batch, _ = _buffer(client).sample(3, "train", 2)  # waits (the pytest timeout bounds it) until a is back
    assert batch.keys == ["a_0_0", "a_1_0", "b_0_0", "b_1_0"]
    assert not client.ack_replay_pass("train", 123)  # too late: its groups went to the next trainer
    client.close()
