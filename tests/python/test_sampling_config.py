"""sampling_config reaches samplers whole, as TransferQueue's controller hands
it over (`self.sampler(ready, batch_size, partition=..., **sampling_config)`):
every key the caller gave becomes a keyword argument of a Python sampler,
dp_rank only when given; GRPOGroupNSampler answers a repeated (dp_rank,
batch_index) with the same group when dp_rank is given. Embedded and remote
mode run the same tests."""

from __future__ import annotations

import numpy as np
import pytest

import seqflow
from remote_services import client_mode, clusters, make_client  # noqa: F401 (fixtures)


class RecordingSampler(seqflow.BaseSampler):
    """Takes the oldest ready samples; records the keyword arguments of each call."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def sample(self, ready_indexes, batch_size, **kwargs):
        self.calls.append({k: v for k, v in kwargs.items() if k not in ("sample_info", "partition")})
        picked = list(ready_indexes)[:batch_size]
        return (picked, picked) if len(picked) == batch_size else ([], [])


def test_every_sampling_config_key_reaches_a_python_sampler(make_client):
    sampler = RecordingSampler()
    client = make_client(sampler)
    client.put({"x": np.arange(8)}, partition_id="p")
    config = {"dp_rank": 1, "batch_index": 2, "temperature": 0.7, "policy_version": 12,
              "tags": ["a", "b"], "nested": {"k": [1, None, True]}}
    client.get_meta(["x"], 2, "p", task_name="t", sampling_config=config, polling=True)
    assert sampler.calls[-1] == {**config, "task_name": "t", "partition_id": "p"}


def test_dp_rank_reaches_the_sampler_only_when_given(make_client):
    sampler = RecordingSampler()
    client = make_client(sampler)
    client.put({"x": np.arange(8)}, partition_id="p")
    client.get_meta(["x"], 2, "p", task_name="t", sampling_config={"temperature": 1.0}, polling=True)
    assert sampler.calls[-1] == {"temperature": 1.0, "batch_index": 0, "task_name": "t", "partition_id": "p"}
    client.get_meta(["x"], 2, "p", task_name="t", polling=True)
    assert sampler.calls[-1] == {"batch_index": 0, "task_name": "t", "partition_id": "p"}
    client.get_meta(["x"], 2, "p", task_name="t", sampling_config={"dp_rank": 0}, polling=True)
    assert sampler.calls[-1] == {"dp_rank": 0, "batch_index": 0, "task_name": "t", "partition_id": "p"}


def test_task_name_and_partition_id_in_sampling_config_reach_the_sampler_as_given(make_client):
    # TransferQueue hands samplers only sampling_config's keys; its
    # StreamingDataset puts task_name there, RankAwareSampler users partition_id.
    sampler = RecordingSampler()
    client = make_client(sampler)
    client.put({"x": np.arange(4)}, partition_id="p")
    config = {"dp_rank": 0, "task_name": "from_config", "partition_id": "config_partition"}
    client.get_meta(["x"], 2, "p", task_name="t", sampling_config=config, polling=True)
    assert sampler.calls[-1] == {**config, "batch_index": 0}
    assert client.get_consumption_status("t", "p")[1].sum() == 2  # the request's task consumed them


def test_bad_sampling_config_is_named_and_changes_nothing(make_client):
    sampler = RecordingSampler()
    client = make_client(sampler)
    client.put({"x": np.arange(4)}, partition_id="p")
    with pytest.raises(ValueError, match="sampling_config\\['model'\\]"):
        client.get_meta(["x"], 2, "p", task_name="t", sampling_config={"model": object()}, polling=True)
    with pytest.raises(ValueError, match="sampling_config\\['partition'\\]"):
        client.get_meta(["x"], 2, "p", task_name="t", sampling_config={"partition": "q"}, polling=True)
    with pytest.raises(TypeError, match="keys must be strings"):
        client.get_meta(["x"], 2, "p", task_name="t", sampling_config={3: 1}, polling=True)
    with pytest.raises(ValueError, match="dp_rank"):
        client.get_meta(["x"], 2, "p", task_name="t", sampling_config={"dp_rank": -1}, polling=True)
    assert sampler.calls == []
    assert not client.get_consumption_status("t", "p")[1].any()


def test_grpo_answers_a_repeated_dp_rank_and_batch_index_with_the_same_group(make_client):
    client = make_client(seqflow.GRPOGroupNSampler(n_samples_per_prompt=2))
    client.put({"x": np.arange(8)}, partition_id="p", custom_meta=[{"group_id": i // 2} for i in range(8)])

    def fetch(config):
        return list(client.get_meta(["x"], 2, "p", task_name="t", sampling_config=config,
                                    polling=True).global_indexes)

    first = fetch({"dp_rank": 0, "batch_index": 0})
    assert len(first) == 2
    # Another TP/PP rank of DP rank 0 asks for the same batch: the same group.
    assert fetch({"dp_rank": 0, "batch_index": 0}) == first
    other_rank = fetch({"dp_rank": 1, "batch_index": 0})
    assert len(other_rank) == 2 and not set(other_rank) & set(first)
    # Without dp_rank every call takes a new group.
    anonymous = [fetch({"batch_index": 0}), fetch({"batch_index": 0})]
    assert all(len(group) == 2 for group in anonymous)
    assert len(set(first + other_rank + anonymous[0] + anonymous[1])) == 8
