"""Samplers from Python: the C++ samplers through the client, the
TransferQueue duplicate scenario, and Python subclasses of BaseSampler."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import seqflow
from seqflow import (BaseSampler, Client, GRPOGroupNSampler, RankAwareSampler, SeqlenBalancedSampler,
                     SequentialSampler, TokenBudgetSampler)


def put_groups(client, partition, groups, n, lengths=None):
    """`groups` prompt groups of n samples, one put each, with total_lengths."""
    rng = np.random.default_rng(7)
    for g in range(groups):
        lens = lengths[g] if lengths is not None else rng.integers(10, 1000, size=n).tolist()
        client.put({"x": np.full(n, g)}, partition_id=partition,
                   custom_meta=[{"total_lengths": int(l), "group": g} for l in lens])


def test_builtin_samplers_are_base_samplers():
    for sampler in (SequentialSampler(), GRPOGroupNSampler(2), RankAwareSampler(), SeqlenBalancedSampler(2, 2),
                    TokenBudgetSampler(100)):
        assert isinstance(sampler, BaseSampler)
    with pytest.raises(ValueError, match="n_samples_per_prompt"):
        GRPOGroupNSampler(0)
    with pytest.raises(ValueError, match="dp_size"):
        SeqlenBalancedSampler(dp_size=0)


def test_builtin_sampler_runs_standalone():
    sampled, consumed = SequentialSampler().sample([5, 3, 9, 1], 2)
    assert sampled == [5, 3] and consumed == [5, 3]
    sampled, _ = GRPOGroupNSampler(2).sample([4, 5, 6], 2, custom_meta={4: {"group_id": 1}, 5: {"group_id": 1}})
    assert sorted(sampled) == [4, 5]


def test_grpo_groups_stay_whole_through_the_client():
    client = Client(GRPOGroupNSampler(4))
    put_groups(client, "p", 3, 4)
    seen = []
    for _ in range(3):
        meta = client.get_meta(["x"], 4, "p", task_name="t", polling=True)
        assert meta.size == 4
        groups = {m["group"] for m in meta.custom_meta}
        assert len(groups) == 1
        seen.extend(groups)
    assert sorted(seen) == [0, 1, 2]


def test_rank_aware_sampler_same_answer_for_the_same_rank_and_batch():
    client = Client(RankAwareSampler())
    client.put({"x": np.arange(8)}, partition_id="p")
    a = client.get_meta(["x"], 2, "p", task_name="t", sampling_config={"dp_rank": 0, "batch_index": 0}, polling=True)
    b = client.get_meta(["x"], 2, "p", task_name="t", sampling_config={"dp_rank": 0, "batch_index": 0}, polling=True)
    c = client.get_meta(["x"], 2, "p", task_name="t", sampling_config={"dp_rank": 1, "batch_index": 0}, polling=True)
    assert list(a.global_indexes) == list(b.global_indexes)
    assert not set(list(a.global_indexes)) & set(list(c.global_indexes))


def test_seqlen_balanced_has_no_transferqueue_duplicates():
    """Rank 0 asks for batch 1 before rank 1 fetched batch 0: TransferQueue
    handed rank 1's batch-0 samples out again. Here every sample goes to
    exactly one (rank, batch)."""
    dp, n, batch = 2, 2, 4  # per rank: 4 samples = 2 groups
    client = Client(SeqlenBalancedSampler(n_samples_per_prompt=n, dp_size=dp))
    put_groups(client, "p", 8, n)  # 16 samples = 2 global batches
    order = [(0, 0), (0, 1), (1, 0), (1, 1)]
    owner = {}
    for rank, index in order:
        meta = client.get_meta(["x"], batch, "p", task_name="t",
                               sampling_config={"dp_rank": rank, "batch_index": index}, polling=True)
        assert meta.size == batch, (rank, index)
        for gi in list(meta.global_indexes):
            assert gi not in owner, f"sample {gi} went to {owner[gi]} and to {(rank, index)}"
            owner[gi] = (rank, index)
        # whole groups on one rank
        groups = [m["group"] for m in meta.custom_meta]
        assert all(groups.count(g) == n for g in groups)
    assert len(owner) == 16
    assert client.check_consumption_status("t", "p")


def test_seqlen_balanced_balances_tokens():
    client = Client(SeqlenBalancedSampler(n_samples_per_prompt=1, dp_size=2))
    lengths = [[l] for l in (1000, 10, 990, 20, 500, 500, 30, 970)]
    put_groups(client, "p", 8, 1, lengths)
    totals = []
    for rank in range(2):
        meta = client.get_meta(["x"], 4, "p", task_name="t", sampling_config={"dp_rank": rank, "batch_index": 0},
                               polling=True)
        totals.append(sum(m["total_lengths"] for m in meta.custom_meta))
    assert abs(totals[0] - totals[1]) <= 20


def test_token_budget_sampler_respects_the_budget():
    client = Client(TokenBudgetSampler(max_tokens=1000))
    put_groups(client, "p", 10, 1, [[300]] * 10)
    meta = client.get_meta(["x"], 100, "p", task_name="t", polling=True)
    assert 0 < sum(m["total_lengths"] for m in meta.custom_meta) <= 1000


class EveryOther(BaseSampler):
    """Takes every other ready sample; remembers its answers per (rank, batch)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def sample(self, ready_indexes, batch_size, **kwargs):
        self.calls.append(kwargs)
        info = kwargs["sample_info"]
        picked = [gi for gi in ready_indexes if info.custom_meta(gi).get("keep")][:batch_size]
        if len(picked) < batch_size:
            return [], []
        key = (kwargs["partition_id"], kwargs["task_name"])
        self._states.setdefault(key[0], {}).setdefault(key[1], {})[(kwargs["dp_rank"], kwargs["batch_index"])] = picked
        return picked, picked

    def reserved(self, partition_id, task_name, sampling_config):
        return self._states.get(partition_id, {}).get(task_name, {}).get(
            (sampling_config["dp_rank"], sampling_config["batch_index"]))

    def state(self):
        return {"calls": len(self.calls)}


def test_python_sampler_subclass():
    sampler = EveryOther()
    client = Client(sampler)
    client.put({"x": np.arange(6)}, partition_id="p", custom_meta=[{"keep": i % 2 == 0} for i in range(6)])
    meta = client.get_meta(["x"], 2, "p", task_name="t", sampling_config={"dp_rank": 1, "batch_index": 3},
                           polling=True)
    assert client.get_data(meta, format="numpy")["x"].tolist() == [0, 2]
    call = sampler.calls[-1]
    assert (call["dp_rank"], call["batch_index"], call["task_name"], call["partition_id"]) == (1, 3, "t", "p")
    # The reserved answer is served again to the same caller.
    again = client.get_meta(["x"], 2, "p", task_name="t", sampling_config={"dp_rank": 1, "batch_index": 3},
                            polling=True)
    assert list(again.global_indexes) == list(meta.global_indexes)
    # Too few left: empty in polling mode.
    assert client.get_meta(["x"], 2, "p", task_name="t", sampling_config={"batch_index": 4}, polling=True).size == 0
    # The sample_info handle is dead after the call.
    with pytest.raises(RuntimeError, match="only during"):
        call["sample_info"].custom_meta(0)
    # clear() reaches the Python sampler.
    client.clear_partition("p")
    assert sampler._states == {}


class Raising(BaseSampler):
    def sample(self, ready_indexes, batch_size, **kwargs):
        raise ValueError("no luck today")


class Lying(BaseSampler):
    def sample(self, ready_indexes, batch_size, **kwargs):
        return [12345], [12345]


def test_python_sampler_errors_reach_the_caller_and_change_nothing():
    client = Client(Raising())
    client.put({"x": np.arange(2)}, partition_id="p")
    with pytest.raises(ValueError, match="no luck today"):
        client.get_meta(["x"], 1, "p", task_name="t", polling=True)
    assert not client.get_consumption_status("t", "p")[1].any()
    lying = Client(Lying())
    lying.put({"x": np.arange(2)}, partition_id="p")
    with pytest.raises(RuntimeError, match="12345"):
        lying.get_meta(["x"], 1, "p", task_name="t", polling=True)


def test_python_sampler_under_concurrent_fetches_from_threads():
    class Take(BaseSampler):
        def sample(self, ready_indexes, batch_size, **kwargs):
            picked = list(ready_indexes[:batch_size])
            return (picked, picked) if len(picked) == batch_size else ([], [])

    client = Client(Take())
    client.put({"x": np.arange(400)}, partition_id="p")
    got, lock = [], threading.Lock()

    def worker():
        while True:
            meta = client.get_meta(["x"], 5, "p", task_name="t", polling=True)
            if meta.size == 0:
                return
            with lock:
                got.extend(list(meta.global_indexes))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(400))


def test_python_sampler_state_in_checkpoints(tmp_path):
    sampler = EveryOther()
    client = Client(sampler)
    client.put({"x": np.arange(4)}, partition_id="p", custom_meta=[{"keep": True}] * 4)
    client.get_meta(["x"], 2, "p", task_name="t", polling=True)
    client.save_checkpoint(tmp_path / "c")
    restored_sampler = EveryOther()
    restored_sampler.restore = lambda state: setattr(restored_sampler, "restored", state)
    restored = Client(restored_sampler)
    restored.load_checkpoint(tmp_path / "c")
    assert restored_sampler.restored == {"calls": 1}
