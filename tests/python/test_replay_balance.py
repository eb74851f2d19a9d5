"""A replay pass balanced over DP ranks (balance_ranks; the drop-ins'
balance_dp_size) places the selected trajectories as verl's trainer places
a sampled batch: verl 0.9.1's own calculate_workload and
get_seqlen_balanced_partitions, run here on the same seq_len tags in arrival
order, give the same order and the same global_seqlen metrics as verl's
log_seqlen_unbalance."""

from __future__ import annotations

import random

import pytest

import seqflow
from remote_services import clusters  # noqa: F401 (fixture)
from required import require
from seqflow.compat.verl import ReplayBufferAsync

torch = require("torch")
verl_balancing = require("verl.utils.seqlen_balancing")


def _fill(client, groups: int, per_group: int, rng: random.Random) -> dict[str, int]:
    """Finished verl groups with random seq_len tags; each trajectory key's length."""
    lengths = {}
    for g in range(groups):
        uid = f"g{g:03d}"
        client.kv_put(uid, "train", tag={"is_prompt": True, "status": "finished", "global_steps": g})
        keys = [f"{uid}_{s}_0" for s in range(per_group)]
        tags = [{"seq_len": rng.randint(1, 8192), "status": "success"} for _ in keys]
        client.kv_batch_put(keys, "train", tags=tags)
        lengths.update((key, tag["seq_len"]) for key, tag in zip(keys, tags))
    return lengths


def _verls_order(keys_in_arrival_order: list[str], lengths: dict[str, int], ranks: int):
    """verl's _balance_batch on these trajectories (no padding needed): its order and its metrics."""
    seqlens = torch.tensor([lengths[key] for key in keys_in_arrival_order], dtype=torch.int64)
    workloads = verl_balancing.calculate_workload(seqlens)
    parts = verl_balancing.get_seqlen_balanced_partitions(workloads.tolist(), k_partitions=ranks, equal_size=True)
    order = [keys_in_arrival_order[j] for part in parts for j in part]
    metrics = verl_balancing.log_seqlen_unbalance(seqlen_list=seqlens.tolist(), partitions=parts,
                                                  prefix="global_seqlen")
    return order, metrics


@pytest.mark.parametrize("seed, groups, per_group, batch, ranks", [(1, 12, 8, 8, 4), (2, 20, 4, 12, 8), (3, 6, 5, 4, 2)])
def test_a_balanced_pass_orders_as_verls_balance_batch(seed, groups, per_group, batch, ranks):
    client = seqflow.Client()
    try:
        lengths = _fill(client, groups, per_group, random.Random(seed))
        plain = seqflow.Client()
        try:
            _fill(plain, groups, per_group, random.Random(seed))
            arrival = list(plain.replay_pass("train", groups, batch).keys)
        finally:
            plain.close()
        answer = client.replay_pass("train", groups, batch, balance_ranks=ranks)
        order, metrics = _verls_order(arrival, lengths, ranks)
        assert list(answer.keys) == order
        assert [tag["seq_len"] for tag in answer.tags] == [lengths[key] for key in order]
        assert list(answer.rank_sizes) == [len(arrival) // ranks] * ranks
        assert max(answer.rank_lengths) == metrics["global_seqlen/balanced_max"]
        assert min(answer.rank_lengths) == metrics["global_seqlen/balanced_min"]
        assert max(answer.arrival_rank_lengths) == metrics["global_seqlen/max"]
    finally:
        client.close()


def test_a_remote_pass_is_balanced_as_an_embedded_one(clusters):  # noqa: F811 (fixture)
    embedded = seqflow.Client()
    remote = clusters(2, processes=True).client()
    try:
        for client in (embedded, remote):
            _fill(client, 8, 4, random.Random(11))
        mine, theirs = (client.replay_pass("train", 8, 4, balance_ranks=4) for client in (embedded, remote))
        assert list(theirs.keys) == list(mine.keys)
        assert (list(theirs.rank_sizes), list(theirs.rank_lengths), list(theirs.arrival_rank_lengths)) == (
            list(mine.rank_sizes), list(mine.rank_lengths), list(mine.arrival_rank_lengths))
    finally:
        embedded.close()
        remote.close()


def test_the_drop_in_serves_a_balanced_batch_with_verls_metrics():
    client = seqflow.Client()
    try:
        lengths = _fill(client, 10, 4, random.Random(7))
        plain = seqflow.Client()
        try:
            _fill(plain, 10, 4, random.Random(7))
            arrival = list(plain.replay_pass("train", 10, 6).keys)
        finally:
            plain.close()
        buffer = ReplayBufferAsync("async", None, None, "drop", {}, client=client, balance_dp_size=4)
        batch, metrics = buffer.sample(10, "train", 6)
        order, verls = _verls_order(arrival, lengths, 4)
        assert batch.keys == order
        for name, value in verls.items():
            assert metrics[name] == pytest.approx(value), name
    finally:
        client.close()


@pytest.mark.parametrize("options, named", [
    ({"balance_ranks": -1}, "balance_ranks"),
    ({"balance_ranks": 2, "balance_workload": "online"}, "balance_workload 'online'"),
    ({"balance_ranks": 2, "balance_length_tag": ""}, "balance_length_tag"),
])
def test_bad_balance_options_are_refused_by_name_and_change_nothing(options, named):
    client = seqflow.Client()
    try:
        _fill(client, 2, 4, random.Random(3))
        before = client.kv_list("train")
        with pytest.raises(ValueError, match=named):
            client.replay_pass("train", 2, 2, **options)
        assert client.kv_list("train") == before
    finally:
        client.close()


def test_the_drop_in_refuses_a_bad_dp_size():
    with pytest.raises(ValueError, match="balance_dp_size"):
        ReplayBufferAsync("async", None, None, "drop", {}, client=None, balance_dp_size=0)


def test_a_batch_off_the_ranks_is_served_in_arrival_order():
    client = seqflow.Client()
    try:
        _fill(client, 2, 3, random.Random(5))
        plain = seqflow.Client()
        try:
            _fill(plain, 2, 3, random.Random(5))
            arrival = list(plain.replay_pass("train", 2, 2).keys)
        finally:
            plain.close()
        answer = client.replay_pass("train", 2, 2, balance_ranks=4)  # 6 trajectories
        assert list(answer.keys) == arrival and list(answer.rank_sizes) == []
    finally:
        client.close()
