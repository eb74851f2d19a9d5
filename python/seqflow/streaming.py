"""StreamingDataset and StreamingDataLoader: a DP rank's stream of batches,
TransferQueue's modes without its defects. The rules (when a rank ends, the
short last batch, stall warnings, worker striding) are in _stream_rules;
docs/streaming.md documents them.
"""

from __future__ import annotations

import os
import queue
import threading
import time
import warnings
from typing import Any, Callable, Iterator, Optional

from seqflow import _convert
from seqflow import _stream_rules as _rules

try:
    import torch
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info
except ImportError:  # pragma: no cover - exercised only without torch
    torch = None
    DataLoader = IterableDataset = object

    def get_worker_info():
        return None

__all__ = ["StreamStalledWarning", "StreamingDataLoader", "StreamingDataset", "default_fetch_batch_fn",
           "split_batch"]

SLEEP_ENV = "TQ_STREAMING_DATASET_EMPTY_BATCH_SLEEP_INTERVAL"


class StreamStalledWarning(UserWarning):
    """A stream has waited long for a batch that, as things stand, cannot come."""


def _require_torch(what: str) -> None:
    if torch is None:
        raise ImportError(f"{what} needs torch; install it (pip install torch)")


def default_fetch_batch_fn(tq_client, data_fields, batch_size, partition_id, task_name, sampling_config,
                           batch_index, data_format: str = "auto", data_layout: str = "dense"):
    """(data, batch_meta) of one batch, or (None, empty meta) when too little
    is ready or the partition does not exist yet (polling: never blocks)."""
    config = {**sampling_config, "batch_index": batch_index}
    # A partition the producers have not created yet polls empty too.
    meta = tq_client.get_meta(data_fields=data_fields, batch_size=batch_size, partition_id=partition_id,
                              task_name=task_name, sampling_config=config, polling=True)
    if meta.size == 0:
        return None, meta
    return tq_client.get_data(meta, fields=data_fields, format=data_format, layout=data_layout), meta


def split_batch(data, batch_meta, micro_batch_size: int = 1) -> list[tuple[Any, Any]]:
    """ceil(n / micro_batch_size) micro-batches of sizes chunk_sizes(n, k),
    the same cut for data and metadata (7 rows at 3 -> 3, 2, 2)."""
    sizes = _rules.micro_batch_sizes(batch_meta.size, micro_batch_size)
    return list(zip(_convert.split_rows(data, sizes), batch_meta.split(sizes))) if sizes else []


class StreamingDataset(IterableDataset):
    """One DP rank's stream of (data, batch_meta) micro-batches: fetches batch
    batch_index through the sampler (get_meta(sampling_config={"dp_rank",
    "batch_index"})), reads its data, splits it into micro-batches. The
    modes and rules: docs/streaming.md (StreamingDataset), seqflow/_stream_rules.py.

    config: used to seqflow.init() the default client when `client` is None.
    batch_size: samples per fetch for this rank (the sampler's per-rank size).
    dp_rank: ranks with the same dp_rank (TP/PP peers) get the same samples
        under RankAwareSampler / SeqlenBalancedSampler.
    should_check_consumption_status: False: streaming, endless, sleeping
        empty_batch_sleep seconds (default TQ_STREAMING_DATASET_EMPTY_BATCH_
        SLEEP_INTERVAL or 1.0) when nothing is ready. True: finite, ends once
        production is complete (total_samples samples hold every data field,
        or every sample of the partition does) and all of it is consumed.
    fetch_batch_fn(tq_client=, data_fields=, batch_size=, partition_id=,
        task_name=, sampling_config=, batch_index=) -> (data or None, meta).
    process_batch_fn(data, meta, micro_batch_size=) -> [(data, meta), ...].
    keep_batches: keep fetched batches so that reset() replays them.
    data_format, data_layout: get_data's format and layout ("dense", or
        "transfer_queue" for TransferQueue's nested containers).
    drop_last: finite mode only. False: the last batch holds what is left
        once production is complete (use True with samplers that split a
        global batch over the ranks when the total is not a whole number of
        global batches). True: the short batch is not fetched (its samples
        stay unconsumed for task_name) and the rank ends.
    warn_after_seconds: how long a stream waits for a batch before it checks
        why and, if the batch cannot come as things stand, warns once
        (StreamStalledWarning); it keeps waiting.
    """

    def __init__(self, config=None, batch_size: int = 1, micro_batch_size: int = 1, data_fields=(),
                 partition_id: str = "", task_name: str = "", dp_rank: int = 0,
                 should_check_consumption_status: bool = False, fetch_batch_fn: Optional[Callable] = None,
                 process_batch_fn: Optional[Callable] = None, *, empty_batch_sleep: Optional[float] = None,
                 total_samples: Optional[int] = None, client=None, data_format: str = "auto",
                 data_layout: str = "dense", keep_batches: bool = True, drop_last: bool = False,
                 warn_after_seconds: float = 60.0):
        _require_torch("StreamingDataset")
        super().__init__()
        if empty_batch_sleep is None:
            empty_batch_sleep = float(os.environ.get(SLEEP_ENV, 1.0))
        checked = _rules.check_stream_arguments(batch_size, micro_batch_size, dp_rank, data_fields, partition_id,
                                                task_name, empty_batch_sleep, total_samples, drop_last,
                                                warn_after_seconds)
        data_fields, empty_batch_sleep = checked.data_fields, checked.empty_batch_sleep
        warn_after_seconds = checked.warn_after_seconds
        self.config = config
        self.batch_size = batch_size
        self.micro_batch_size = micro_batch_size
        self.data_fields = data_fields
        self.partition_id = partition_id
        self.task_name = task_name
        self.dp_rank = dp_rank
        self.should_check_consumption_status = should_check_consumption_status
        self.fetch_batch_fn = fetch_batch_fn or default_fetch_batch_fn
        self.process_batch_fn = process_batch_fn or split_batch
        self.empty_batch_sleep = empty_batch_sleep
        self.total_samples = total_samples
        self.data_format = data_format
        self.data_layout = data_layout
        self.keep_batches = keep_batches
        self.drop_last = drop_last
        self.warn_after_seconds = warn_after_seconds
        self.sampling_config = {"dp_rank": dp_rank, "task_name": task_name}
        self._client = client
        self._owner_pid = os.getpid()
        self._lock = threading.Lock()
        self.buffer: dict[int, tuple[Any, Any]] = {}
        self._cursors: dict[tuple[int, int], int] = {}

    # ---- client -----------------------------------------------------------
    def _get_client(self):
        if self._client is None:
            from seqflow.default_client import init

            self._client = init(self.config)
        if os.getpid() != self._owner_pid and not getattr(self._client, "is_remote", False):
            raise RuntimeError(
                "StreamingDataset runs in a DataLoader worker process, but its seqflow client is embedded "
                "in the parent process: a worker would fetch from a private copy. Use "
                "seqflow.StreamingDataLoader (its workers are threads), num_workers=0, or a remote client.")
        return self._client

    # A worker process started by spawn gets a pickled copy: the lock is
    # made anew, a remote client travels as its RemoteConfig.
    def __getstate__(self):
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # ---- iteration ----------------------------------------------------------
    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        for _, data, meta in self.batches(worker, workers):
            yield from self.process_batch_fn(data, meta, micro_batch_size=self.micro_batch_size)

    def batches(self, worker: int = 0, workers: int = 1, stop: Optional[threading.Event] = None):
        """(batch_index, data, meta) of the batches worker `worker` of
        `workers` handles: indexes worker, worker + workers, ..."""
        _rules.check_worker_share(worker, workers)
        client, key = self._get_client(), (worker, workers)
        watch = _rules.StallWatch(self.warn_after_seconds)
        with self._lock:
            index = self._cursors.get(key, worker)
        while stop is None or not stop.is_set():
            with self._lock:
                # A batch handed back (give_back) is replayed once unless batches are kept.
                cached = self.buffer.get(index) if self.keep_batches else self.buffer.pop(index, None)
            if cached is None:
                data, meta = self._fetch(client, index, self.batch_size)
                if data is None and self.should_check_consumption_status:
                    left = self._left_to_consume(client)
                    if left is not None:  # production is complete: ask for what is left
                        last = _rules.fetch_after_production(self.batch_size, self.drop_last, left)
                        data, meta = self._fetch(client, index, last.batch_size)
                        if data is None and last.ends_if_empty:
                            return
                if data is None:
                    if watch.empty_fetch() and self._warn_if_stalled(client):
                        watch.warned()
                    self._sleep(stop)
                    continue
                watch.batch_came()
                cached = (data, meta)
                if self.keep_batches:
                    with self._lock:
                        self.buffer[index] = cached
            with self._lock:
                self._cursors[key] = index + workers
            yield (index, *cached)
            index += workers

    def give_back(self, worker: int, workers: int, index: int, data, meta) -> None:
        """A batch worker `worker` of `workers` fetched that reached no
        consumer: its samples are consumed at the controller, so it is kept
        and the worker's next pass starts at it."""
        key = (worker, workers)
        with self._lock:
            self.buffer[index] = (data, meta)
            self._cursors[key] = min(self._cursors.get(key, index), index)

    def _fetch(self, client, index: int, batch_size: int):
        kwargs = dict(tq_client=client, data_fields=self.data_fields, batch_size=batch_size,
                      partition_id=self.partition_id, task_name=self.task_name,
                      sampling_config=self.sampling_config, batch_index=index)
        if self.fetch_batch_fn is default_fetch_batch_fn:
            kwargs["data_format"] = self.data_format
            kwargs["data_layout"] = self.data_layout
        return self.fetch_batch_fn(**kwargs)

    def _status_client(self, client):
        """The seqflow Client to ask for production and consumption status
        (the compat layer fetches through TransferQueue's client, whose status
        calls answer in TransferQueue's shapes)."""
        return client

    def _left_to_consume(self, client) -> Optional[int]:
        """Produced samples the task has not consumed, or None while
        production is not complete."""
        client = self._status_client(client)
        indexes, produced = client.get_production_status(self.data_fields, self.partition_id)
        if produced is None or not _rules.production_complete(produced, self.total_samples):
            return None
        consumed_indexes, consumed = client.get_consumption_status(self.task_name, self.partition_id)
        if consumed is None:  # the partition was cleared meanwhile
            return None
        return _rules.left_to_consume(indexes, produced, consumed_indexes, consumed)

    def _warn_if_stalled(self, client) -> bool:
        """Warns when the batch waited for cannot come as things stand; True
        if it warned."""
        _, produced = self._status_client(client).get_production_status(self.data_fields, self.partition_id,
                                                                        per_field=True)
        left = self._left_to_consume(client) if self.should_check_consumption_status and produced is not None else None
        reason = _rules.stall_reason(self.data_fields, produced, left)
        if reason is None:
            return False
        warnings.warn(f"StreamingDataset (partition {self.partition_id!r}, task {self.task_name!r}) has waited "
                      f"{self.warn_after_seconds:g} s for a batch: {reason}; it keeps waiting.",
                      StreamStalledWarning, stacklevel=2)
        return True

    def _sleep(self, stop: Optional[threading.Event]) -> None:
        if stop is not None:
            stop.wait(self.empty_batch_sleep)
        else:
            time.sleep(self.empty_batch_sleep)

    def reset(self) -> None:
        """Iterate again from batch 0, replaying the fetched batches."""
        with self._lock:
            self._cursors.clear()

    def step(self, partition_id: str) -> None:
        """Move to another partition: forget the fetched batches, restart at batch 0."""
        with self._lock:
            self.buffer = {}
            self._cursors.clear()
            self.partition_id = partition_id


class StreamingDataLoader(DataLoader):
    """A DataLoader over a StreamingDataset that yields (data, batch_meta)
    micro-batches. With num_workers > 0 the workers are threads (the client
    is embedded in this process): worker w fetches batch indexes w, w + W, ...
    ahead of the consumer (prefetch_factor batches each), and batches come out
    in batch-index order."""

    def __init__(self, dataset: StreamingDataset, num_workers: int = 0, prefetch_factor: Optional[int] = None,
                 **kwargs):
        _require_torch("StreamingDataLoader")
        if not isinstance(dataset, StreamingDataset):
            raise ValueError(f"StreamingDataLoader needs a StreamingDataset, got {type(dataset).__name__}")
        _rules.check_int_at_least(num_workers, "num_workers", 0)
        if prefetch_factor is not None:
            _rules.check_int_at_least(prefetch_factor, "prefetch_factor", 1)
        self._thread_workers = int(num_workers)
        self._prefetch = 2 if prefetch_factor is None else int(prefetch_factor)
        kwargs.setdefault("collate_fn", _identity)
        super().__init__(dataset, batch_size=None, num_workers=0, **kwargs)

    @property
    def workers(self) -> int:
        return self._thread_workers

    def reset(self) -> None:
        """Iterate again from batch 0 (StreamingDataset.reset)."""
        self.dataset.reset()

    def step(self, partition_id: str) -> None:
        """Move to another partition (StreamingDataset.step): a loader is
        reused across training steps, one partition each."""
        self.dataset.step(partition_id)

    def __iter__(self):
        if self._thread_workers <= 0:
            return super().__iter__()
        return self._threaded()

    def _threaded(self):
        """Worker w's batches go through its own bounded queue; the consumer
        takes the queues in worker order (worker w handles batch indexes w,
        w + W, ..., so batches come out in batch-index order). Batches the
        consumer never started when it stops go back to the dataset
        (StreamingDataset.give_back): their samples are consumed already."""
        dataset: StreamingDataset = self.dataset
        workers = self._thread_workers
        stop = threading.Event()  # the consumer left: workers stop fetching and handing over
        queues = [queue.Queue(maxsize=self._prefetch) for _ in range(workers)]

        def hand_over(w: int, item) -> bool:
            """Waits for room in worker w's queue; False (not handed over) once stopped."""
            while not stop.is_set():
                try:
                    queues[w].put(item, timeout=_HANDOVER_RECHECK)
                    return True
                except queue.Full:
                    pass
            return False

        def work(w: int) -> None:
            try:
                for index, data, meta in dataset.batches(w, workers, stop):
                    parts = dataset.process_batch_fn(data, meta, micro_batch_size=dataset.micro_batch_size)
                    if not hand_over(w, (index, data, meta, parts)):
                        dataset.give_back(w, workers, index, data, meta)
                        return
                hand_over(w, _WORKER_DONE)
            except BaseException as error:  # handed to the consumer
                hand_over(w, error)

        threads = [threading.Thread(target=work, args=(w,), daemon=True, name=f"seqflow-loader-{w}")
                   for w in range(workers)]
        for t in threads:
            t.start()
        try:
            live = list(range(workers))
            while live:
                for w in list(live):
                    item = queues[w].get()  # every worker ends with _WORKER_DONE or its error
                    if item is _WORKER_DONE:
                        live.remove(w)
                    elif isinstance(item, BaseException):
                        raise item
                    else:
                        yield from item[3]
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=5)
            for w, waiting in enumerate(queues):
                while not waiting.empty():
                    item = waiting.get_nowait()
                    if isinstance(item, tuple):
                        dataset.give_back(w, workers, *item[:3])


# A worker's last item in its queue; and how often a worker waiting for room
# checks whether the consumer left.
_WORKER_DONE = object()
_HANDOVER_RECHECK = 0.05


def _identity(x):
    return x
