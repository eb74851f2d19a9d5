"""busy_poll_us: a remote client's control calls spin up to that long before
they sleep, and still return what was put while they waited; the setting
travels through configs and pickles, and bad values are refused naming it.
(How much CPU the spin costs is a measurement, not a test: no clock here.)"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import seqflow
from background import Background
from remote_services import clusters  # noqa: F401 (fixture)


def fetch_while_a_put_comes_late(client, writer, partition: str, wait: float) -> None:
    """A get_meta of `client` whose samples `writer` puts `wait` s later returns those samples."""
    writer.put({"x": np.arange(1)}, partition_id=partition)
    assert client.get_meta(["x"], 1, partition, task_name="t").size == 1
    late_put = Background(lambda: writer.put({"x": np.arange(2)}, partition_id=partition), delay=wait)
    meta = client.get_meta(["x"], 2, partition, task_name="t", timeout=20)
    put = late_put.finish(30)
    assert sorted(meta.global_indexes) == sorted(put.global_indexes)


def test_control_calls_that_spin_or_sleep_return_what_was_put_while_they_waited(clusters):
    cluster = clusters(1, processes=True)
    writer = cluster.client()
    spinning = cluster.client(busy_poll_us=1_000_000)
    sleeping = cluster.client(busy_poll_us=0)
    assert spinning.remote_config.busy_poll_us == 1_000_000 and sleeping.remote_config.busy_poll_us == 0
    fetch_while_a_put_comes_late(spinning, writer, "spun", 0.4)  # the put comes within the spin
    fetch_while_a_put_comes_late(spinning, writer, "spun_out", 1.5)  # ... and after it
    fetch_while_a_put_comes_late(sleeping, writer, "slept", 0.4)


def test_busy_poll_us_comes_from_the_config_and_survives_pickling(clusters):
    cluster = clusters(1)
    config = {"controller": {"address": cluster.address}, "timeout": 20.0, "busy_poll_us": 50}
    client = seqflow.Client.from_config(config)
    assert client.remote_config.busy_poll_us == 50
    assert pickle.loads(pickle.dumps(client.remote_config)).busy_poll_us == 50
    client.put({"x": np.arange(3)}, partition_id="p")
    assert client.get_meta(["x"], 3, "p", task_name="t").size == 3
    assert seqflow.RemoteConfig(cluster.address).busy_poll_us == 200  # the default


@pytest.mark.parametrize("value, message", [
    (-1, "busy_poll_us must be >= 0, got -1"),
    (1_000_001, "busy_poll_us must be <= 1000000, got 1000001"),
    (1.5, "busy_poll_us must be an integer, got 1.5"),
    (True, "busy_poll_us must be an integer, got True"),
])
def test_bad_busy_poll_us_is_refused_naming_it(value, message):
    with pytest.raises(ValueError, match=message):
        seqflow.RemoteConfig("tcp://127.0.0.1:1", busy_poll_us=value)
    with pytest.raises(ValueError, match=message):
        seqflow.Client.remote("tcp://127.0.0.1:1", timeout=0.5, busy_poll_us=value)
