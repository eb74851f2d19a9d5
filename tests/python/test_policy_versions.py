"""Client.set_policy_version / policy_version / policy_versions: the trainer's
current policy version, never going back, and the versions each sample was
inserted and completed at, by global index or by key. Embedded and remote
mode run the same tests."""

from __future__ import annotations

import numpy as np
import pytest

from remote_services import client_in_each_mode, client_mode, clusters, make_client  # noqa: F401 (fixtures)


@pytest.fixture
def client(client_in_each_mode):  # noqa: F811
    return client_in_each_mode


def test_the_version_starts_at_zero_and_never_goes_back(client):
    assert client.policy_version() == 0
    client.set_policy_version(4)
    client.set_policy_version(4)
    assert client.policy_version() == 4
    with pytest.raises(ValueError, match="version 3 is below the current policy version 4"):
        client.set_policy_version(3)
    with pytest.raises(ValueError, match="version .*got -1"):
        client.set_policy_version(-1)
    with pytest.raises(ValueError, match="version"):
        client.set_policy_version(2**62)
    assert client.policy_version() == 4


def test_samples_record_their_start_and_finish_versions(client):
    client.set_policy_version(1)
    first = client.put({"x": np.arange(2)}, partition_id="p")
    client.set_policy_version(2)
    indexes = [int(i) for i in first.global_indexes]
    start, finish = client.policy_versions("p", indexes)
    assert start.dtype == np.int64 and finish.dtype == np.int64
    assert start.tolist() == [1, 1] and finish.tolist() == [1, 1]
    client.kv_batch_put(["a"], "q", fields={"x": np.arange(1)})
    client.set_policy_version(3)
    client.kv_batch_put(["a", "b"], "q", fields={"x": np.arange(2)})  # a re-put: a keeps its start
    start, finish = client.policy_versions("q", keys=["b", "a"])
    assert start.tolist() == [3, 2] and finish.tolist() == [3, 3]
    with pytest.raises(KeyError, match="123456"):
        client.policy_versions("p", [123456])
    with pytest.raises(KeyError, match="nope"):
        client.policy_versions("q", keys=["nope"])
    with pytest.raises(ValueError, match="exactly one"):
        client.policy_versions("q", [0], keys=["a"])


def test_a_checkpoint_keeps_the_versions(client, tmp_path):
    client.set_policy_version(5)
    put = client.put({"x": np.arange(3)}, partition_id="p")
    client.set_policy_version(6)
    client.save_checkpoint(tmp_path / "ckpt")
    client.set_policy_version(9)
    client.load_checkpoint(tmp_path / "ckpt")
    assert client.policy_version() == 6
    start, finish = client.policy_versions("p", put.global_indexes)
    assert start.tolist() == [5, 5, 5] and finish.tolist() == [5, 5, 5]
