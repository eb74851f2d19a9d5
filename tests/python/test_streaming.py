"""StreamingDataset / StreamingDataLoader: streaming and finite modes over 8
simulated DP ranks (threads), exactly once, every rank ends, the short last
batch (or drop_last), the warning about fields no sample has, workers do not
duplicate batches, data and metadata split alike, step / reset, the
empty-batch sleep, and seqflow without torch."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import seqflow
from background import Background, finish_all
from remote_services import client_mode, clusters, make_client  # noqa: F401 (fixtures)
from required import require
from support import wait_until
from seqflow import RankAwareSampler, SeqlenBalancedSampler, SequentialSampler

torch = require("torch")
from seqflow import StreamingDataLoader, StreamingDataset, streaming  # noqa: E402

DP = 8


def dataset(client, rank, **kwargs):
    defaults = dict(batch_size=4, micro_batch_size=2, data_fields=["x"], partition_id="p", task_name="train",
                    dp_rank=rank, client=client, empty_batch_sleep=0.005, data_format="numpy")
    defaults.update(kwargs)
    return StreamingDataset(**defaults)


def produce(client, batches, size, *, group=1, delay=0.002, start=0):
    """Puts `batches` puts of `size` samples; x = the sample's id."""
    for b in range(batches):
        ids = np.arange(start + b * size, start + (b + 1) * size)
        client.put({"x": ids}, partition_id="p",
                   custom_meta=[{"total_lengths": int(10 + i % 7), "id": int(i)} for i in ids])
        time.sleep(delay)


def run_ranks(datasets, timeout=60):
    """Iterates each dataset in its own thread; returns the ids each rank saw.
    Fails when a rank fails or has not ended within `timeout` seconds."""

    def run(rank):
        seen = []
        for data, meta in datasets[rank]:
            assert data["x"].tolist() == [m["id"] for m in meta.custom_meta]
            seen.extend(data["x"].tolist())
        return seen

    return finish_all([Background(run, r, name=f"rank {r}") for r in range(len(datasets))], timeout)


@pytest.mark.parametrize("sampler_factory", [SequentialSampler, lambda: SeqlenBalancedSampler(2, DP),
                                             RankAwareSampler])
def test_finite_mode_exactly_once_and_every_rank_ends(sampler_factory, make_client):  # noqa: F811
    client = make_client(sampler_factory())
    total = DP * 4 * 3  # three global batches of 4 per rank
    producer = Background(produce, client, total // 8, 8)
    seen = run_ranks([dataset(client, r, should_check_consumption_status=True, total_samples=total)
                      for r in range(DP)])
    producer.finish(60)
    everything = sorted(i for rank in seen for i in rank)
    assert everything == list(range(total))


def test_finite_mode_ends_ranks_whose_last_batch_never_comes(make_client):  # noqa: F811
    """17 batches of 4 over 8 ranks: one rank gets batch index 2, the others
    wait for a batch 2 that never comes, and must still end."""
    client = make_client(SequentialSampler())
    total = 17 * 4
    producer = Background(produce, client, 17, 4)
    seen = run_ranks([dataset(client, r, should_check_consumption_status=True, total_samples=total)
                      for r in range(DP)])
    producer.finish(60)
    assert sorted(i for rank in seen for i in rank) == list(range(total))


def test_finite_mode_without_total_waits_for_the_partition_then_ends(make_client):  # noqa: F811
    """Without total_samples, production is complete once every sample of
    the partition holds the fields, so the rank waits for the partition to
    appear, then drains it."""
    client = make_client()
    ds = dataset(client, 0, should_check_consumption_status=True)
    producer = Background(produce, client, 1, 8, delay=0.1)
    seen = run_ranks([ds])
    producer.finish(60)
    assert sorted(seen[0]) == list(range(8))


def test_streaming_mode_exactly_once_over_eight_ranks(make_client):  # noqa: F811
    client = make_client()
    total = DP * 4 * 4
    done = threading.Event()
    counted = []
    lock = threading.Lock()

    def run(rank, out):
        for data, meta in dataset(client, rank):
            ids = data["x"].tolist()
            with lock:
                out.extend(i for i in ids if i < total)
                if len([i for i in out]) >= total:
                    done.set()
            if done.is_set():
                return

    ranks = [Background(run, r, counted, name=f"rank {r}") for r in range(DP)]
    produce(client, total // 8, 8)
    assert done.wait(60)
    # Endless ranks stop only between batches: feed them until all returned.
    extra = total
    deadline = time.monotonic() + 60
    while not all(rank.done() for rank in ranks):
        assert time.monotonic() < deadline, "a streaming rank never returned"
        produce(client, 1, 4 * DP, start=extra, delay=0)
        extra += 4 * DP
        time.sleep(0.05)
    finish_all(ranks, 0)  # re-raises a rank's failure
    assert sorted(counted) == list(range(total))


@pytest.mark.parametrize("sampler_factory", [SequentialSampler, RankAwareSampler])
@pytest.mark.parametrize("total_samples", [None, 8])
def test_finite_mode_delivers_the_short_last_batch(sampler_factory, total_samples, make_client):  # noqa: F811
    """8 samples in batches of 3: 3, 3, then the last 2, and the stream ends."""
    client = make_client(sampler_factory())
    produce(client, 1, 8, delay=0)
    ds = dataset(client, 0, batch_size=3, micro_batch_size=3, should_check_consumption_status=True,
                 total_samples=total_samples)
    seen = run_ranks([ds], timeout=20)
    assert seen[0] == list(range(8))
    ds.reset()
    assert [m.size for _, m in ds] == [3, 3, 2]  # the kept short batch replays too
    assert client.check_consumption_status("train", "p")


def test_finite_mode_delivers_the_tail_over_several_ranks_and_loader_workers(make_client):  # noqa: F811
    """34 samples, batches of 4 over 3 ranks (2 through a loader with two
    workers): every sample once, every rank ends."""
    client = make_client(RankAwareSampler())
    total = 34
    producer = Background(produce, client, 17, 2)

    def loader_rank(rank):
        loader = StreamingDataLoader(dataset(client, rank, should_check_consumption_status=True,
                                             total_samples=total), num_workers=2)
        return [i for data, _ in loader for i in data["x"].tolist()]

    loaders = [Background(loader_rank, r, name=f"rank {r}") for r in (1, 2)]
    seen = run_ranks([dataset(client, 0, should_check_consumption_status=True, total_samples=total)])
    seen += finish_all(loaders, 60)
    producer.finish(60)
    assert sorted(i for rank in seen for i in rank) == list(range(total))


def test_drop_last_ends_without_the_short_batch_and_leaves_it_unconsumed(make_client):  # noqa: F811
    client = make_client()
    produce(client, 1, 8, delay=0)
    ds = dataset(client, 0, batch_size=3, micro_batch_size=3, should_check_consumption_status=True,
                 drop_last=True)
    seen = run_ranks([ds], timeout=20)
    assert seen[0] == list(range(6))
    indexes, consumed = client.get_consumption_status("train", "p")
    assert indexes[~consumed].tolist() == [6, 7]
    # The dropped samples are still there for the task: a later stream gets them.
    assert run_ranks([dataset(client, 0, batch_size=3, should_check_consumption_status=True)])[0] == [6, 7]


@pytest.mark.parametrize("mode", ["embedded", "local"])
def test_transfer_queue_compat_dataset_delivers_the_short_last_batch(mode):
    """The same through seqflow's transfer_queue, which fetches through
    TransferQueue's client API; "local" runs the services on loopback."""
    from tensordict import TensorDict

    from seqflow.compat.transfer_queue import interface
    from seqflow.compat.transfer_queue.dataloader import StreamingDataset as CompatStreamingDataset

    conf = interface.init({"controller": {"polling_mode": True}, "seqflow": {"mode": mode},
                           "metrics": {"enabled": False}})
    try:
        interface.get_client().put(TensorDict({"x": torch.arange(8)}, batch_size=8), partition_id="p")
        ds = CompatStreamingDataset(conf, 3, 3, ["x"], "p", "train", 0, should_check_consumption_status=True,
                                    empty_batch_sleep=0.005)
        reader = Background(lambda: [meta.size for _, meta in ds], name="the stream")
        assert reader.finish(60) == [3, 3, 2]
    finally:
        interface.close()


def collect_warnings(ds, give_up_after: float, react=None) -> tuple[list, list[int], bool]:
    """Iterates ds in this thread (warnings are recorded per thread only
    here) until it ends, `react(stalls so far)` returns True (asked every
    20 ms from a watcher thread), or `give_up_after` seconds pass; returns
    the stall warnings, the ids delivered and whether the stream ended by
    itself."""
    stop = threading.Event()
    ids = []

    def stalls(caught):
        return [w for w in list(caught) if issubclass(w.category, streaming.StreamStalledWarning)]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # a repeated warning would show, not be folded

        def watch():
            deadline = time.monotonic() + give_up_after
            while not stop.is_set():
                if time.monotonic() > deadline or (react is not None and react(stalls(caught))):
                    stop.set()
                    return True
                time.sleep(0.02)
            return False

        watcher = Background(watch, name="the warnings' watcher")
        for _, data, _ in ds.batches(stop=stop):
            ids.extend(data["x"].tolist())
        ended = not stop.is_set()
        stop.set()
        watcher.finish(10)
    return stalls(caught), ids, ended


def test_a_field_no_sample_has_is_warned_about_once_and_the_stream_keeps_waiting(make_client):  # noqa: F811
    client = make_client()
    meta = client.put({"x": np.arange(4)}, partition_id="p", custom_meta=[{"id": i} for i in range(4)])
    ds = dataset(client, 0, data_fields=["x", "x_typo"], should_check_consumption_status=True,
                 warn_after_seconds=0.2)
    late = []

    def put_once_warned(stalls):
        """Written late, once the warning came: the stream must still be waiting then."""
        if stalls and not late:
            late.append(Background(client.put, {"x_typo": np.arange(4)}, metadata=meta, delay=0.5))
        return False

    caught, ids, ended = collect_warnings(ds, give_up_after=60, react=put_once_warned)
    assert len(late) == 1, "no warning came"
    late[0].finish(30)
    assert ids == [0, 1, 2, 3] and ended
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "'x_typo'" in message and "'x'" not in message
    assert "partition 'p'" in message and "task 'train'" in message


def test_no_warning_while_every_field_is_written_somewhere(make_client):  # noqa: F811
    """A field some samples have is being produced: waiting for it is normal."""
    client = make_client()
    client.put({"x": np.arange(2), "y": np.arange(2)}, partition_id="p")
    client.put({"x": np.arange(2, 4)}, partition_id="p")
    ds = dataset(client, 0, data_fields=["x", "y"], warn_after_seconds=0.05)
    caught, ids, ended = collect_warnings(ds, give_up_after=0.5)  # ten warning periods without one
    assert caught == [] and ids == [] and not ended


@pytest.mark.parametrize("drop_last", [False, True])
def test_a_tail_shorter_than_a_global_batch_warns_or_is_dropped(drop_last, make_client):  # noqa: F811
    """SeqlenBalancedSampler over 2 ranks serves whole global batches of
    2 x 4 only: of 10 samples, the last 2 never come out. Without drop_last
    the stream says so once and keeps waiting; with it the stream ends."""
    client = make_client(SeqlenBalancedSampler(1, 2))
    produce(client, 1, 10, delay=0)
    ds = dataset(client, 0, should_check_consumption_status=True, drop_last=drop_last, warn_after_seconds=0.2)
    first_warned = []

    def a_while_after_the_first_warning(stalls):
        """Stops the stream 0.6 s (three warning periods) after the first warning."""
        if stalls and not first_warned:
            first_warned.append(time.monotonic())
        return bool(first_warned) and time.monotonic() - first_warned[0] > 0.6

    caught, ids, ended = collect_warnings(ds, give_up_after=60, react=a_while_after_the_first_warning)
    assert len(ids) == 4 and ended == drop_last
    if drop_last:
        assert caught == []
    else:
        assert len(caught) == 1
        message = str(caught[0].message)
        assert "2 sample(s) left" in message and "drop_last=True" in message and "partition 'p'" in message


def test_empty_batch_sleep_is_honoured(monkeypatch):
    monkeypatch.setenv("TQ_STREAMING_DATASET_EMPTY_BATCH_SLEEP_INTERVAL", "0.125")
    client = seqflow.Client()  # the fetch below is replaced: no mode to compare
    assert dataset(client, 0, empty_batch_sleep=None).empty_batch_sleep == 0.125
    events = []

    def counting_fetch(**kwargs):
        events.append("fetch")
        if events.count("fetch") > 3:
            raise InterruptedError("test over")
        return None, seqflow.BatchMeta.empty()

    class RecordingTime:
        """streaming's clock, with each sleep recorded instead of slept."""
        monotonic = staticmethod(time.monotonic)

        @staticmethod
        def sleep(seconds):
            events.append(seconds)

    monkeypatch.setattr(streaming, "time", RecordingTime)
    ds = dataset(client, 0, empty_batch_sleep=0.1, fetch_batch_fn=counting_fetch)
    with pytest.raises(InterruptedError):
        next(iter(ds))
    # One sleep of empty_batch_sleep after each empty fetch: no busy loop, no longer wait.
    assert events == ["fetch", 0.1, "fetch", 0.1, "fetch", 0.1, "fetch"]


def test_loader_workers_do_not_duplicate_batches(make_client):  # noqa: F811
    client = make_client(RankAwareSampler())
    produce(client, 6, 8, delay=0)  # 48 samples: 12 batches of 4 for one rank
    ds = dataset(client, 0, should_check_consumption_status=True, total_samples=48, micro_batch_size=4)
    fetched = []
    original = ds.fetch_batch_fn

    def recording_fetch(**kwargs):
        data, meta = original(**kwargs)
        if data is not None:
            fetched.append((threading.current_thread().name, kwargs["batch_index"], meta.global_indexes))
        return data, meta

    ds.fetch_batch_fn = recording_fetch
    loader = StreamingDataLoader(ds, num_workers=2, prefetch_factor=2)
    got = []
    for data, meta in loader:
        assert data["x"].tolist() == [m["id"] for m in meta.custom_meta]
        got.extend(meta.global_indexes)
    assert sorted(got) == list(range(48)) and len(got) == len(set(got))
    by_worker = {}
    for name, index, _ in fetched:
        by_worker.setdefault(name, []).append(index)
    assert len(by_worker) == 2
    indexes = sorted(by_worker.values())
    assert all(i % 2 == 0 for i in indexes[0]) and all(i % 2 == 1 for i in indexes[1])
    assert len(indexes[0]) + len(indexes[1]) == 12 and not set(indexes[0]) & set(indexes[1])


def test_torch_worker_processes_are_refused():
    # Embedded only: a remote client's worker processes connect their own client
    # (test_remote_streaming.py::test_torch_worker_processes_connect_their_own_client).
    client = seqflow.Client()
    produce(client, 1, 4, delay=0)
    loader = torch.utils.data.DataLoader(dataset(client, 0), batch_size=None, num_workers=1,
                                         multiprocessing_context="fork")
    with pytest.raises(RuntimeError, match="StreamingDataLoader"):
        next(iter(loader))


def test_micro_batches_split_data_and_meta_alike(make_client):  # noqa: F811
    client = make_client()
    produce(client, 1, 7, delay=0)
    ds = dataset(client, 0, batch_size=7, micro_batch_size=3, should_check_consumption_status=True,
                 total_samples=7, data_format="auto")
    parts = list(ds)
    assert [m.size for _, m in parts] == [3, 2, 2]
    for data, meta in parts:
        assert data["x"].tolist() == meta.global_indexes


@pytest.mark.parametrize("through_loader", [False, True])
def test_reset_replays_and_step_moves_on(make_client, through_loader):  # noqa: F811
    """The loader's reset() and step() are its dataset's (TransferQueue's
    recipes reuse one loader across partitions)."""
    client = make_client()
    produce(client, 2, 4, delay=0)
    ds = dataset(client, 0, should_check_consumption_status=True, total_samples=8)
    stream = StreamingDataLoader(ds) if through_loader else ds
    first = [m.global_indexes for _, m in stream]
    stream.reset()
    assert [m.global_indexes for _, m in stream] == first
    client.put({"x": np.arange(100, 104)}, partition_id="q",
               custom_meta=[{"id": i} for i in range(100, 104)])
    stream.step("q")
    ds.total_samples = 4
    assert sorted(i for data, _ in stream for i in data["x"].tolist()) == [100, 101, 102, 103]


def test_bad_arguments():
    client = seqflow.Client()  # checks of StreamingDataset's arguments: no client call
    for kwargs, pattern in [({"batch_size": 0}, "batch_size"), ({"micro_batch_size": -1}, "micro_batch_size"),
                            ({"data_fields": []}, "data_fields"), ({"dp_rank": -1}, "dp_rank"),
                            ({"empty_batch_sleep": -1.0}, "empty_batch_sleep"), ({"task_name": ""}, "task_name"),
                            ({"warn_after_seconds": 0}, "warn_after_seconds must be a number > 0, got 0"),
                            ({"warn_after_seconds": -5.0}, r"warn_after_seconds .*-5\.0"),
                            ({"warn_after_seconds": float("nan")}, "warn_after_seconds .*nan"),
                            ({"warn_after_seconds": "60"}, "warn_after_seconds .*'60'"),
                            ({"warn_after_seconds": True}, "warn_after_seconds .*True"),
                            ({"drop_last": "yes"}, "drop_last must be True or False, got 'yes'")]:
        with pytest.raises(ValueError, match=pattern):
            dataset(client, 0, **kwargs)


def test_import_without_torch():
    code = (
        "import sys\n"
        "sys.modules['torch'] = None\n"
        "sys.modules['tensordict'] = None\n"
        "import numpy as np, seqflow\n"
        "c = seqflow.Client()\n"
        "m = c.put({'x': np.arange(3), 'v': [np.arange(2), np.arange(3)] + [np.arange(1)]}, partition_id='p')\n"
        "d = c.get_data(m)\n"
        "assert isinstance(d, dict) and d['x'].tolist() == [0, 1, 2] and len(d['v']) == 3\n"
        "try:\n"
        "    seqflow.StreamingDataset(client=c, batch_size=1, data_fields=['x'], partition_id='p', task_name='t')\n"
        "except ImportError as e:\n"
        "    print('refused:', e)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "refused" in result.stdout and "torch" in result.stdout


def test_a_worker_outside_its_count_is_refused():
    ds = dataset(seqflow.Client(), 0)
    with pytest.raises(ValueError, match=r"worker must be in \[0, workers\), got worker 2 of 2"):
        next(ds.batches(2, 2))


def test_micro_batch_sizes_cover_every_row_with_sizes_apart_by_at_most_one(make_client):  # noqa: F811
    client = make_client()
    produce(client, 1, 7, delay=0)
    meta = client.get_meta(["x"], batch_size=7, partition_id="p", task_name="t", mode="force_fetch")
    data = client.get_data(meta, format="numpy")
    for size in (1, 2, 3, 7, 8, 10**30):
        parts = streaming.split_batch(data, meta, size)
        sizes = [m.size for _, m in parts]
        assert sum(sizes) == 7 and max(sizes) <= size and max(sizes) - min(sizes) <= 1
        assert len(parts) == -(-7 // min(size, 7))
        assert [i for d, _ in parts for i in d["x"].tolist()] == meta.global_indexes
    for bad in (0, True, 1.5, None):
        with pytest.raises(ValueError, match=f"micro_batch_size must be an integer >= 1, got {bad!r}"):
            streaming.split_batch(data, meta, bad)


def loader_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("seqflow-loader-")]


def test_a_loader_whose_consumer_leaves_stops_its_workers_even_while_they_wait_for_room(make_client):  # noqa: F811
    """Streaming mode never ends; prefetch 1 fills each worker's queue at once.
    Closing the iterator after two batches stops both workers."""
    client = make_client()
    produce(client, 1, 16, delay=0)
    ds = dataset(client, 0, batch_size=2, micro_batch_size=2)
    batch_index_of = {}
    original = ds.fetch_batch_fn

    def recording_fetch(**kwargs):
        data, meta = original(**kwargs)
        if data is not None:
            batch_index_of[tuple(meta.global_indexes)] = kwargs["batch_index"]
        return data, meta

    ds.fetch_batch_fn = recording_fetch
    loader = StreamingDataLoader(ds, num_workers=2, prefetch_factor=1)
    batches = iter(loader)
    first = [batch_index_of[tuple(next(batches)[1].global_indexes)] for _ in range(3)]
    assert first == [0, 1, 2], "batches come out in batch-index order, the workers in turn"
    assert len(loader_threads()) == 2
    batches.close()
    wait_until(lambda: not loader_threads(), 10, "a loader worker outlived its consumer", poll=0.02)


def test_a_loader_workers_error_reaches_the_consumer(make_client):  # noqa: F811
    client = make_client()
    produce(client, 1, 8, delay=0)
    ds = dataset(client, 0, batch_size=2, micro_batch_size=2, should_check_consumption_status=True)
    original = ds.fetch_batch_fn

    def failing_fetch(**kwargs):
        if kwargs["batch_index"] == 1:
            raise KeyError("batch 1 cannot be read")
        return original(**kwargs)

    ds.fetch_batch_fn = failing_fetch
    with pytest.raises(KeyError, match="batch 1 cannot be read"):
        for _ in StreamingDataLoader(ds, num_workers=2):
            pass


def test_a_loader_refuses_worker_counts_and_prefetch_that_are_not_counts():
    ds = dataset(seqflow.Client(), 0)
    for kwargs, pattern in [({"num_workers": -1}, "num_workers must be an integer >= 0, got -1"),
                            ({"num_workers": 1.5}, "num_workers must be an integer >= 0, got 1.5"),
                            ({"num_workers": 2, "prefetch_factor": 0}, "prefetch_factor must be an integer >= 1, got 0"),
                            ({"num_workers": 2, "prefetch_factor": -1}, "prefetch_factor must be an integer >= 1, got -1"),
                            ({"num_workers": 2, "prefetch_factor": 1.5},
                             "prefetch_factor must be an integer >= 1, got 1.5")]:
        with pytest.raises(ValueError, match=pattern):
            StreamingDataLoader(ds, **kwargs)


@pytest.mark.parametrize("keep_batches", [True, False])
def test_a_loader_stopped_early_gives_its_prefetched_batches_back(make_client, keep_batches):  # noqa: F811
    """Three batches taken, the loop left while the workers hold more:
    the next pass delivers every other sample, none twice."""
    client = make_client()
    produce(client, 1, 40, delay=0)
    ds = dataset(client, 0, batch_size=2, micro_batch_size=2, should_check_consumption_status=True,
                 total_samples=40, keep_batches=keep_batches)
    loader = StreamingDataLoader(ds, num_workers=2, prefetch_factor=2)
    batches = iter(loader)
    seen = [i for _ in range(3) for i in next(batches)[0]["x"].tolist()]
    batches.close()
    seen += [i for data, _ in loader for i in data["x"].tolist()]
    assert sorted(seen) == list(range(40))
