"""Samplers from Python: the C++ samplers through the client, the
TransferQueue duplicate scenario, and Python subclasses of BaseSampler."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import seqflow
from background import Background, finish_all
from remote_services import client_mode, clusters, make_client  # noqa: F401 (fixtures)
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


def test_a_builtin_samplers_settings_cannot_change_after_it_is_made():
    sampler = SeqlenBalancedSampler(n_samples_per_prompt=2, dp_size=2)
    for name, value in (("dp_size", 4), ("n_samples_per_prompt", 8), ("algorithm", "kk"), ("workload", "quadratic")):
        with pytest.raises(AttributeError, match=f"SeqlenBalancedSampler.{name} is fixed when the sampler is made"):
            setattr(sampler, name, value)
    assert (sampler.dp_size, sampler.n_samples_per_prompt, sampler.algorithm) == (2, 2, "auto")
    with pytest.raises(AttributeError, match="max_tokens is fixed"):
        TokenBudgetSampler(100).max_tokens = 5
    with pytest.raises(AttributeError, match="n_samples_per_prompt is fixed"):
        GRPOGroupNSampler(2).n_samples_per_prompt = 3
    sampler.note = "mine"  # attributes of the caller's own stay free
    assert sampler.note == "mine"


def test_builtin_sampler_runs_standalone():
    sampled, consumed = SequentialSampler().sample([5, 3, 9, 1], 2)
    assert sampled == [5, 3] and consumed == [5, 3]
    sampled, _ = GRPOGroupNSampler(2).sample([4, 5, 6], 2, custom_meta={4: {"group_id": 1}, 5: {"group_id": 1}})
    assert sorted(sampled) == [4, 5]


def test_grpo_groups_stay_whole_through_the_client(make_client):  # noqa: F811
    client = make_client(GRPOGroupNSampler(4))
    put_groups(client, "p", 3, 4)
    seen = []
    for _ in range(3):
        meta = client.get_meta(["x"], 4, "p", task_name="t", polling=True)
        assert meta.size == 4
        groups = {m["group"] for m in meta.custom_meta}
        assert len(groups) == 1
        seen.extend(groups)
    assert sorted(seen) == [0, 1, 2]


def test_rank_aware_sampler_same_answer_for_the_same_rank_and_batch(make_client):  # noqa: F811
    client = make_client(RankAwareSampler())
    client.put({"x": np.arange(8)}, partition_id="p")
    a = client.get_meta(["x"], 2, "p", task_name="t", sampling_config={"dp_rank": 0, "batch_index": 0}, polling=True)
    b = client.get_meta(["x"], 2, "p", task_name="t", sampling_config={"dp_rank": 0, "batch_index": 0}, polling=True)
    c = client.get_meta(["x"], 2, "p", task_name="t", sampling_config={"dp_rank": 1, "batch_index": 0}, polling=True)
    assert list(a.global_indexes) == list(b.global_indexes)
    assert not set(list(a.global_indexes)) & set(list(c.global_indexes))


def test_seqlen_balanced_has_no_transferqueue_duplicates(make_client):  # noqa: F811
    """Rank 0 asks for batch 1 before rank 1 fetched batch 0: TransferQueue
    handed rank 1's batch-0 samples out again. Here every sample goes to
    exactly one (rank, batch)."""
    dp, n, batch = 2, 2, 4  # per rank: 4 samples = 2 groups
    client = make_client(SeqlenBalancedSampler(n_samples_per_prompt=n, dp_size=dp))
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


def test_seqlen_balanced_balances_tokens(make_client):  # noqa: F811
    client = make_client(SeqlenBalancedSampler(n_samples_per_prompt=1, dp_size=2))
    lengths = [[l] for l in (1000, 10, 990, 20, 500, 500, 30, 970)]
    put_groups(client, "p", 8, 1, lengths)
    totals = []
    for rank in range(2):
        meta = client.get_meta(["x"], 4, "p", task_name="t", sampling_config={"dp_rank": rank, "batch_index": 0},
                               polling=True)
        totals.append(sum(m["total_lengths"] for m in meta.custom_meta))
    assert abs(totals[0] - totals[1]) <= 20


def test_token_budget_sampler_respects_the_budget(make_client):  # noqa: F811
    client = make_client(TokenBudgetSampler(max_tokens=1000))
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
        self._states.setdefault(key[0], {}).setdefault(key[1], {})[(kwargs.get("dp_rank"), kwargs["batch_index"])] = picked
        return picked, picked

    def reserved(self, partition_id, task_name, sampling_config):
        return self._states.get(partition_id, {}).get(task_name, {}).get(
            (sampling_config.get("dp_rank"), sampling_config["batch_index"]))

    def state(self):
        return {"calls": len(self.calls)}


def test_python_sampler_subclass(make_client):  # noqa: F811
    sampler = EveryOther()
    client = make_client(sampler)
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


def test_python_sampler_errors_reach_the_caller_and_change_nothing(make_client):  # noqa: F811
    client = make_client(Raising())
    client.put({"x": np.arange(2)}, partition_id="p")
    with pytest.raises(ValueError, match="no luck today"):
        client.get_meta(["x"], 1, "p", task_name="t", polling=True)
    assert not client.get_consumption_status("t", "p")[1].any()
    lying = make_client(Lying())
    lying.put({"x": np.arange(2)}, partition_id="p")
    with pytest.raises(RuntimeError, match="12345"):
        lying.get_meta(["x"], 1, "p", task_name="t", polling=True)


def test_python_sampler_under_concurrent_fetches_from_threads(make_client):  # noqa: F811
    class Take(BaseSampler):
        def sample(self, ready_indexes, batch_size, **kwargs):
            picked = list(ready_indexes[:batch_size])
            return (picked, picked) if len(picked) == batch_size else ([], [])

    client = make_client(Take())
    client.put({"x": np.arange(400)}, partition_id="p")
    got, lock = [], threading.Lock()

    def worker():
        while True:
            meta = client.get_meta(["x"], 5, "p", task_name="t", polling=True)
            if meta.size == 0:
                return
            with lock:
                got.extend(list(meta.global_indexes))

    finish_all([Background(worker, name=f"fetcher {k}") for k in range(4)], 60)
    assert sorted(got) == list(range(400))


def test_python_sampler_state_in_checkpoints(tmp_path, make_client):  # noqa: F811
    sampler = EveryOther()
    client = make_client(sampler)
    client.put({"x": np.arange(4)}, partition_id="p", custom_meta=[{"keep": True}] * 4)
    client.get_meta(["x"], 2, "p", task_name="t", polling=True)
    client.save_checkpoint(tmp_path / "c")
    restored_sampler = EveryOther()
    restored_sampler.restore = lambda state: setattr(restored_sampler, "restored", state)
    restored = make_client(restored_sampler)
    restored.load_checkpoint(tmp_path / "c")
    assert restored_sampler.restored == {"calls": 1}


# ---- TransferQueue 0.1.11's sampler contract, called directly and through a client ----

TQ_SAMPLER_FILES = ("base", "sequential_sampler", "grpo_group_n_sampler", "rank_aware_sampler",
                    "seqlen_balanced_sampler")


def _load_transferqueue_samplers() -> dict:
    """TransferQueue 0.1.11's sampler classes, executed from its wheel (the
    package itself is never imported): {class name: class}."""
    import ast
    import sys
    import zipfile
    from pathlib import Path

    tools = str(Path(__file__).resolve().parents[2] / "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    import reference_peer

    namespace: dict = {"__name__": "transferqueue_reference_samplers"}
    with zipfile.ZipFile(reference_peer.wheel_path()) as wheel:
        for name in TQ_SAMPLER_FILES:
            path = f"transfer_queue/sampler/{name}.py"
            tree = ast.parse(wheel.read(path).decode())
            # Their `from transfer_queue.sampler import ...` names are defined in this namespace already.
            tree.body = [node for node in tree.body
                         if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("transfer_queue"))]
            exec(compile(tree, f"<TransferQueue {path}>", "exec"), namespace)
    return namespace


_TQ: list = []


@pytest.fixture(scope="session")
def tq():
    """TransferQueue 0.1.11's sampler classes; fails the test when its wheel cannot be had."""
    if not _TQ:
        try:
            _TQ.append((_load_transferqueue_samplers(), None))
        except Exception as error:  # noqa: BLE001 - any failure means: no reference here
            _TQ.append((None, f"TransferQueue 0.1.11's wheel, the reference, cannot be had: {error!r}"))
    classes, reason = _TQ[0]
    if classes is None:
        pytest.fail(reason, pytrace=False)
    return classes


class MockPartition:
    """TransferQueue's DataPartitionStatus as samplers see it."""

    def __init__(self, custom_meta: dict):
        self.custom_meta = custom_meta

    def get_custom_meta(self, global_indexes):
        return {i: self.custom_meta[i] for i in global_indexes if i in self.custom_meta}


def both(tq_sampler, seqflow_sampler, *args, **kwargs):
    """Both samplers' answers, or the exception type each raised."""
    answers = []
    for sampler in (tq_sampler, seqflow_sampler):
        try:
            answers.append(sampler.sample(*args, **kwargs))
        except ValueError:
            answers.append(ValueError)
    return answers


def random_ready(rng, universe: int, keep: float = 0.8) -> list[int]:
    ready = [i for i in range(universe) if rng.random() < keep]
    rng.shuffle(ready)
    return ready


def test_sequential_matches_transferqueue(tq, rng):
    for _ in range(300):
        ready = random_ready(rng, 30, rng.random())
        batch_size = int(rng.integers(-3, 34))
        theirs, ours = both(tq["SequentialSampler"](), SequentialSampler(), ready, batch_size)
        assert ours == theirs, (ready, batch_size)


def test_grpo_matches_transferqueue(tq, rng):
    for _ in range(300):
        n = int(rng.integers(1, 5))
        ready = random_ready(rng, 40)
        batch_size = n * int(rng.integers(0, 8)) + (int(rng.integers(1, n)) if n > 1 and rng.random() < 0.2 else 0)
        theirs, ours = both(tq["GRPOGroupNSampler"](n), GRPOGroupNSampler(n), ready, batch_size)
        assert ours == theirs, (n, ready, batch_size)


def test_grpo_keeps_answers_per_named_rank_as_transferqueue(tq, rng):
    """A caller naming dp_rank gets the same groups for a repeated
    (dp_rank, batch_index); consumers drop what each call consumed."""
    for _ in range(30):
        n = int(rng.integers(1, 4))
        theirs, ours = tq["GRPOGroupNSampler"](n), GRPOGroupNSampler(n)
        ready_theirs, ready_ours = list(range(60)), list(range(60))
        for _ in range(12):
            kwargs = dict(task_name="t", partition_id="p", dp_rank=int(rng.integers(0, 2)),
                          batch_index=int(rng.integers(0, 3)))
            batch_size = n * int(rng.integers(1, 4))
            a = theirs.sample(ready_theirs, batch_size, **kwargs)
            b = ours.sample(ready_ours, batch_size, **kwargs)
            assert b == a, kwargs
            ready_theirs = [i for i in ready_theirs if i not in a[1]]
            ready_ours = [i for i in ready_ours if i not in b[1]]
        assert ours.has_cached_result("p", "t", kwargs) == theirs.has_cached_result("p", "t", kwargs)


def test_rank_aware_matches_transferqueue(tq, rng):
    for _ in range(30):
        theirs, ours = tq["RankAwareSampler"](), RankAwareSampler()
        ready = random_ready(rng, 60)
        for _ in range(12):
            kwargs = dict(dp_rank=int(rng.integers(0, 3)), batch_index=int(rng.integers(0, 3)),
                          task_name=str(rng.choice(["a", "b"])), partition_id="p")
            batch_size = int(rng.integers(0, 8))
            a, b = both(theirs, ours, ready, batch_size, **kwargs)
            assert b == a, kwargs
            ready = [i for i in ready if i not in a[1]]
        assert ours._states == theirs._states


def test_seqlen_balanced_kk_matches_transferqueue(tq, rng):
    """Where TransferQueue's split is defined (group counts divide dp_size),
    algorithm="kk" gives every rank the same samples, with lengths read
    through a partition, and the same equal split without one."""
    for _ in range(150):
        n, dp, groups_per_rank = int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(1, 4))
        ready = random_ready(rng, n * dp * groups_per_rank * 2, 0.9)
        partition = MockPartition({i: {"total_lengths": int(rng.integers(1, 1000))} for i in range(200)})
        with_partition = dict(partition=partition) if rng.random() < 0.8 else {}
        theirs = tq["SeqlenBalancedSampler"](n_samples_per_prompt=n, dp_size=dp)
        ours = SeqlenBalancedSampler(n_samples_per_prompt=n, dp_size=dp, algorithm="kk")
        for rank in rng.permutation(dp).tolist():
            a, b = both(theirs, ours, ready, n * groups_per_rank, task_name="t", partition_id="p", dp_rank=rank,
                        batch_index=0, **with_partition)
            assert b == a, (n, dp, ready, rank, with_partition)
        assert ours._balanced_cache == theirs._balanced_cache
        assert ours._states == theirs._states


def test_seqlen_balanced_stays_exactly_once_where_transferqueue_duplicates(tq):
    """Rank 0 asks for batch 1 before rank 1 fetched batch 0, and the caller
    marks what each answer reports consumed (TransferQueue's contract):
    TransferQueue hands rank 1's batch-0 samples out again, seqflow does not."""
    partition = MockPartition({i: {"total_lengths": 10 + i} for i in range(8)})

    def run(sampler):
        ready, owners = list(range(8)), {}
        for rank, batch_index in [(0, 0), (0, 1), (1, 0), (1, 1)]:
            sampled, consumed = sampler.sample(ready, 2, task_name="t", partition_id="p", dp_rank=rank,
                                               batch_index=batch_index, partition=partition)
            assert consumed == sampled  # each rank's own share, as TransferQueue reports it
            for gi in sampled:
                owners.setdefault(gi, []).append((rank, batch_index))
            ready = [i for i in ready if i not in consumed]
        return owners

    theirs = run(tq["SeqlenBalancedSampler"](n_samples_per_prompt=1, dp_size=2))
    assert any(len(owner) > 1 for owner in theirs.values()), "TransferQueue's defect is gone: update docs/switching.md"
    ours = run(SeqlenBalancedSampler(n_samples_per_prompt=1, dp_size=2))
    assert sorted(ours) == list(range(8)) and all(len(owner) == 1 for owner in ours.values())


def test_base_sampler_is_abstract():
    with pytest.raises(TypeError, match="abstract"):
        BaseSampler()

    class NoSample(BaseSampler):
        pass

    with pytest.raises(TypeError, match="sample"):
        NoSample()


def test_constructor_defaults_and_errors_as_transferqueue():
    assert GRPOGroupNSampler().n_samples_per_prompt == 1
    balanced = SeqlenBalancedSampler()
    assert (balanced.n_samples_per_prompt, balanced.dp_size, balanced.algorithm) == (1, 1, "auto")
    assert isinstance(balanced, GRPOGroupNSampler)
    with pytest.raises(ValueError, match="n_samples_per_prompt must be positive, got -2"):
        GRPOGroupNSampler(n_samples_per_prompt=-2)
    with pytest.raises(ValueError, match="dp_size must be positive, got 0"):
        SeqlenBalancedSampler(dp_size=0)
    for sampler in (SequentialSampler(), GRPOGroupNSampler(), RankAwareSampler(), SeqlenBalancedSampler()):
        assert sampler._states == {}


def test_sequential_direct_call_slices_but_a_client_waits_for_a_whole_batch(make_client):  # noqa: F811
    assert SequentialSampler().sample([4, 2], 5) == ([4, 2], [4, 2])
    assert SequentialSampler()([0, 1, 2, 3], -1) == ([0, 1, 2], [0, 1, 2])
    client = make_client(SequentialSampler())
    client.put({"x": np.arange(2)}, partition_id="p")
    assert client.get_meta(["x"], 5, "p", task_name="t", polling=True).size == 0
    assert client.get_meta(["x"], 2, "p", task_name="t", polling=True).size == 2


# Factories: a sampler held by pytest's parametrization outlives the module and nanobind reports it leaked at exit.
@pytest.mark.parametrize("make_sampler", [lambda: GRPOGroupNSampler(2), RankAwareSampler,
                                          lambda: SeqlenBalancedSampler(2, 2), lambda: TokenBudgetSampler(100)],
                         ids=["GRPOGroupNSampler", "RankAwareSampler", "SeqlenBalancedSampler", "TokenBudgetSampler"])
def test_negative_batch_size_is_a_value_error(make_sampler):
    sampler = make_sampler()
    with pytest.raises(ValueError, match="batch_size must be >= 0, got -2"):
        sampler.sample([0, 1, 2, 3], -2, custom_meta={})


def test_grpo_zero_batch_and_transferqueue_groups():
    assert GRPOGroupNSampler(2).sample([0, 1, 2, 3], 0) == ([], [])
    # Sorted, then greedy runs of n consecutive indexes.
    assert GRPOGroupNSampler(3).sample([11, 0, 1, 3, 4, 5, 6, 7, 9, 10], 6)[0] == [3, 4, 5, 9, 10, 11]
    assert GRPOGroupNSampler(1).sample([5, 3, 9], 2)[0] == [3, 5]
    # custom_meta group_id beats contiguity.
    groups = {0: {"group_id": "a"}, 1: {"group_id": "b"}, 2: {"group_id": "a"}, 3: {"group_id": "b"}}
    assert GRPOGroupNSampler(2).sample([0, 1, 2, 3], 2, custom_meta=groups)[0] == [0, 2]


def test_rank_aware_repeats_its_answer_and_rejects_a_negative_rank():
    sampler = RankAwareSampler()
    first = sampler.sample([0, 1, 2, 3], 2, dp_rank=0, batch_index=0, task_name="t", partition_id="p")
    assert sampler.sample([2, 3], 2, dp_rank=0, batch_index=0, task_name="t", partition_id="p") == first == (
        [0, 1], [0, 1])
    assert sampler.has_cached_result("p", "t", {"dp_rank": 0, "batch_index": 0})
    assert not sampler.has_cached_result("p", "t", {"dp_rank": 1, "batch_index": 0})
    with pytest.raises(ValueError, match="dp_rank -1 must be greater than or equal to 0"):
        sampler.sample([0, 1], 1, dp_rank=-1, batch_index=0, task_name="t", partition_id="p")


def test_seqlen_balanced_direct_calls():
    sampler = SeqlenBalancedSampler(n_samples_per_prompt=2, dp_size=2)
    call = dict(task_name="t", partition_id="p", batch_index=0)
    # No partition: equal split in order, whole groups.
    assert sampler.sample([7, 6, 5, 4, 3, 2, 1, 0], 4, dp_rank=1, **call) == ([4, 5, 6, 7], [4, 5, 6, 7])
    assert sampler.sample([], 4, dp_rank=0, **call) == ([0, 1, 2, 3], [0, 1, 2, 3])
    assert sampler._balanced_cache == {("p", "t", 0): [[0, 1, 2, 3], [4, 5, 6, 7]]}
    assert sampler.has_cached_result("p", "t", {"dp_rank": 1, "batch_index": 0})
    # A rank past dp_size gets nothing; a negative one is an error.
    assert sampler.sample(list(range(8)), 4, dp_rank=2, **call) == ([], [])
    with pytest.raises(ValueError, match="dp_rank"):
        sampler.sample(list(range(8)), 4, dp_rank=-1, task_name="t", partition_id="p", batch_index=1)
    # Checkpoint hooks carry the reservations.
    restored = SeqlenBalancedSampler(n_samples_per_prompt=2, dp_size=2)
    restored.load_checkpoint(sampler.save_checkpoint())
    assert restored._balanced_cache == sampler._balanced_cache
    sampler.clear_cache("p")
    assert sampler._balanced_cache == {} and sampler._states == {}
    # Lengths through the partition: 100 + 10 on each rank.
    partition = MockPartition({0: {"total_lengths": 100}, 1: {"total_lengths": 100}, 2: {"total_lengths": 10},
                               3: {"total_lengths": 10}})
    balanced = SeqlenBalancedSampler(n_samples_per_prompt=1, dp_size=2)
    shares = [balanced.sample([0, 1, 2, 3], 2, dp_rank=rank, partition=partition, **call)[0] for rank in (0, 1)]
    assert sorted(sum(shares, [])) == [0, 1, 2, 3]
    assert [sum(partition.custom_meta[i]["total_lengths"] for i in share) for share in shares] == [110, 110]


def test_seqlen_balanced_leaves_unserved_shares_out_of_later_batches():
    """Direct calls, the caller marking only each rank's own share consumed:
    batch 1 never takes rank 1's share of batch 0."""
    sampler = SeqlenBalancedSampler(n_samples_per_prompt=1, dp_size=2)
    meta = {i: {"total_lengths": 1} for i in range(8)}
    call = dict(task_name="t", partition_id="p", custom_meta=meta)
    r0b0, _ = sampler.sample(list(range(8)), 2, dp_rank=0, batch_index=0, **call)
    r0b1, _ = sampler.sample([i for i in range(8) if i not in r0b0], 2, dp_rank=0, batch_index=1, **call)
    r1b0, _ = sampler.sample([], 2, dp_rank=1, batch_index=0, **call)
    assert len(set(r0b0 + r0b1 + r1b0)) == 6
    # Once served, rank 1's batch-0 share no longer holds anything back.
    left = [i for i in range(8) if i not in r0b0 + r0b1 + r1b0]
    r0b2, _ = sampler.sample(left, 1, dp_rank=0, batch_index=2, **call)
    r1b2, _ = sampler.sample([], 1, dp_rank=1, batch_index=2, **call)
    assert sorted(r0b2 + r1b2) == sorted(i for i in left if i not in sampler._balanced_cache[("p", "t", 1)][1])


def test_custom_sampler_gets_the_partition_as_transferqueue_passes_it(make_client):  # noqa: F811
    seen = {}

    class LongestFirst(BaseSampler):
        def sample(self, ready_indexes, batch_size, partition=None, **kwargs):
            meta = partition.get_custom_meta(list(ready_indexes))
            seen.update(partition_id=partition.partition_id, meta=meta)
            picked = sorted(ready_indexes, key=lambda gi: -meta.get(gi, {"total_lengths": 0})["total_lengths"])
            picked = picked[:batch_size]
            return (picked, picked) if len(picked) == batch_size else ([], [])

    client = make_client(LongestFirst())
    client.put({"x": np.arange(4)}, partition_id="p", custom_meta=[{"total_lengths": l} for l in (5, 50, 20, 40)])
    client.put({"x": np.arange(1)}, partition_id="p")  # index 4: no custom_meta
    meta = client.get_meta(["x"], 2, "p", task_name="t", polling=True)
    assert list(meta.global_indexes) == [1, 3]
    assert seen["partition_id"] == "p" and sorted(seen["meta"]) == [0, 1, 2, 3]


def test_transferqueue_style_caching_sampler_through_a_client(make_client):  # noqa: F811
    """A sampler written for TransferQueue caches its answer in _states;
    the client serves it again to the same (dp_rank, batch_index) without
    consuming twice."""

    class CachingSampler(BaseSampler):
        def sample(self, ready_indexes, batch_size, dp_rank=None, batch_index=None, task_name="",
                   partition_id="", **kwargs):
            states = self._states.setdefault(partition_id, {}).setdefault(task_name, {})
            if batch_index in states.get(dp_rank, {}):
                return states[dp_rank][batch_index]
            picked = list(ready_indexes[:batch_size])
            if len(picked) < batch_size:
                return [], []
            states.setdefault(dp_rank, {})[batch_index] = (picked, picked)
            return picked, picked

    client = make_client(CachingSampler())
    client.put({"x": np.arange(4)}, partition_id="p")
    fetch = lambda rank: list(client.get_meta(["x"], 2, "p", task_name="t", polling=True,  # noqa: E731
                                              sampling_config={"dp_rank": rank, "batch_index": 0}).global_indexes)
    assert fetch(0) == [0, 1]
    assert fetch(0) == [0, 1]
    assert fetch(1) == [2, 3]


def test_python_subclass_of_a_builtin_runs_its_own_sample(make_client):  # noqa: F811
    class Newest(SequentialSampler):
        def sample(self, ready_indexes, batch_size, *args, **kwargs):
            picked = list(ready_indexes)[::-1][:batch_size]
            return picked, picked

    assert isinstance(Newest(), BaseSampler) and issubclass(Newest, SequentialSampler)
    client = make_client(Newest())
    client.put({"x": np.arange(4)}, partition_id="p")
    assert list(client.get_meta(["x"], 2, "p", task_name="t", polling=True).global_indexes) == [3, 2]


def test_sampler_keeping_other_things_in_states_through_a_client(make_client):  # noqa: F811
    """TransferQueue's tutorial keeps an RNG in _states: neither the cached-
    answer lookup nor clearing a partition may trip over it."""

    class RandomWithReplacement(BaseSampler):
        def __init__(self):
            super().__init__()
            self._states["rng"] = np.random.RandomState(0)

        def sample(self, ready_indexes, batch_size, **kwargs):
            picked = self._states["rng"].choice(ready_indexes, size=batch_size).tolist()
            return picked, []

    sampler = RandomWithReplacement()
    client = make_client(sampler)
    client.put({"x": np.arange(4)}, partition_id="rng")
    for _ in range(3):
        meta = client.get_meta(["x"], 3, "rng", task_name="t", sampling_config={"dp_rank": 0}, polling=True)
        assert meta.size == 3 and set(meta.global_indexes) <= {0, 1, 2, 3}
    assert not client.get_consumption_status("t", "rng")[1].any()
    client.clear_partition("rng")
    assert "rng" not in sampler._states  # TransferQueue's clear_cache drops the partition's key


@pytest.mark.parametrize(("call", "error", "message"), [
    # A float batch_size was truncated (2.7 -> 2); an int-like str leaked int()'s words.
    (lambda: GRPOGroupNSampler(2).sample([0, 1, 2, 3], 2.7), TypeError, "batch_size must be an integer, got 2.7"),
    (lambda: RankAwareSampler().sample([0, 1], 1, dp_rank="0"), TypeError, "dp_rank must be an integer, got '0'"),
    (lambda: RankAwareSampler().sample([0, 1], 1, batch_index=1.5), TypeError, "batch_index must be an integer"),
    (lambda: GRPOGroupNSampler(2).sample([0, 1], 2, partition_id=3), TypeError, "partition_id must be a str, got int"),
    (lambda: SeqlenBalancedSampler(2, 2, default_length=1.5), TypeError, "default_length must be an integer"),
    (lambda: TokenBudgetSampler(100, default_length=-1), ValueError, "default_length must be >= 0, got -1"),
    (lambda: SeqlenBalancedSampler(dp_size="2"), TypeError, "dp_size must be an integer, got '2'"),
    (lambda: GRPOGroupNSampler(n_samples_per_prompt=0), ValueError, "n_samples_per_prompt must be positive, got 0"),
    (lambda: SeqlenBalancedSampler(algorithm=3), TypeError, "algorithm must be a str, got int 3"),
    (lambda: TokenBudgetSampler(max_tokens=0), ValueError, "max_tokens must be positive, got 0"),
])
def test_bad_sampler_arguments_are_named(call, error, message):
    with pytest.raises(error, match=message.replace(".", r"\.").replace("(", r"\(")):
        call()
