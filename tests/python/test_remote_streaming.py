"""StreamingDataset in remote mode, unchanged: DP ranks as threads,
StreamingDataLoader with two workers, and torch DataLoader worker processes
(fork and spawn: each connects its own client from the RemoteConfig) all
consume every sample exactly once, and the short last batch comes out over
four ranks. (test_streaming.py runs the rest in both modes: drop_last, the
warning about a field no sample has, ...)"""

from __future__ import annotations


import numpy as np
import pytest

from background import Background
from remote_services import clusters  # noqa: F401 (fixture)
from required import require

torch = require("torch")
from seqflow import StreamingDataLoader, StreamingDataset  # noqa: E402
from test_streaming import run_ranks  # noqa: E402

RANKS = 4
PER_RANK = 4


def produce(client, samples: int, per_put: int = 8) -> None:
    for start in range(0, samples, per_put):
        ids = np.arange(start, min(start + per_put, samples))
        client.put({"x": ids}, partition_id="p", custom_meta=[{"total_lengths": 10, "id": int(i)} for i in ids])


def finite_dataset(client, rank: int, total, **kwargs) -> StreamingDataset:
    kwargs = {"batch_size": PER_RANK, "micro_batch_size": 2, "data_fields": ["x"], **kwargs}
    return StreamingDataset(partition_id="p", task_name="train", dp_rank=rank, client=client,
                            should_check_consumption_status=True, total_samples=total, empty_batch_sleep=0.01,
                            data_format="numpy", **kwargs)


def as_is(batch):
    """The DataLoader's collate_fn: micro-batches pass unchanged (picklable for spawn)."""
    return batch


def ids_of(batches) -> list[int]:
    ids = []
    for data, meta in batches:
        assert list(data["x"]) == [m["id"] for m in meta.custom_meta]
        ids.extend(int(i) for i in data["x"])
    return ids


def test_ranks_as_threads_consume_every_sample_once(clusters):
    cluster = clusters(2, controller_args={"sampler": "rank_aware"})
    client = cluster.client()
    total = RANKS * PER_RANK * 3
    producer = Background(produce, client, total, delay=0.05)
    seen = run_ranks([finite_dataset(client, rank, total) for rank in range(RANKS)])
    producer.finish(60)
    assert sorted(i for rank in seen for i in rank) == list(range(total))


@pytest.mark.parametrize("total_samples", [None, 30])
def test_the_short_last_batch_comes_out(clusters, total_samples):
    """30 samples in batches of 4 over 4 ranks: 7 full batches, then the last 2."""
    client = clusters(2, controller_args={"sampler": "rank_aware"}).client()
    produce(client, 30)
    seen = run_ranks([finite_dataset(client, rank, total_samples) for rank in range(RANKS)], timeout=20)
    assert sorted(i for rank in seen for i in rank) == list(range(30))
    assert client.check_consumption_status("train", "p")


def test_streaming_data_loader_with_two_workers(clusters):
    client = clusters(2).client()
    total = 48
    produce(client, total)
    loader = StreamingDataLoader(finite_dataset(client, 0, total), num_workers=2)
    ids = ids_of(loader)
    assert sorted(ids) == list(range(total))


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_torch_worker_processes_connect_their_own_client(clusters, context):
    client = clusters(2).client()
    total = 48
    produce(client, total)
    dataset = finite_dataset(client, 0, total)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2, multiprocessing_context=context,
                                         collate_fn=as_is, timeout=120)
    ids = ids_of(loader)
    assert sorted(ids) == list(range(total))
    assert client.check_consumption_status("train", "p")
    # The parent's own connection is unharmed by the workers.
    assert client.get_partition_list() == ["p"]
