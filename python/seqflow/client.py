"""The client: TransferQueue's API over seqflow's controller and storage.

``seqflow.init(config)`` creates the process's default client: embedded
(the default: the controller and the storage live in this process), remote
when the config names a controller service (``{"controller": {"address":
"tcp://10.0.0.1:5555"}}``, see ``Client.from_config``), or on a Ray cluster
with ``backend="ray"`` (see seqflow.remote). ``seqflow.get_client()``
returns it and the module-level functions (``seqflow.put``,
``seqflow.get_meta``, ...) delegate to it. Every call also exists as
``async_<name>``, which runs the call in a worker thread: the C++ side
releases the GIL for every controller and storage call, so waiting never
blocks the event loop or other Python threads.

Errors: bad arguments raise ValueError, reading or writing samples, fields
and keys that do not exist raises KeyError (StaleSampleError, a KeyError,
for a BatchMeta whose samples were cleared, whose indexes hold other samples
now, or whose partition_ids name another partition), a fetch that waited too long
raises TimeoutError; the state is unchanged after any of them. As in
TransferQueue, a partition that does not exist (yet, or any more) is no
error: fetches find nothing ready in it (a waiting fetch waits for it),
status checks are False, clears and resets do nothing.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import threading
import weakref
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from seqflow import _convert, _seqflow
from seqflow._async import async_twin
from seqflow._checks import (check_bool, check_choice, check_count, check_instance, check_int64, check_int64_list,
                             check_name, check_names, check_optional_bool, check_optional_name, check_path,
                             check_seconds, check_tag)
from seqflow._config import read_config
from seqflow.balance import timing_columns
from seqflow.batch_meta import BatchMeta, KVBatchMeta
from seqflow.samplers import native_sampler

_native = _seqflow.client
_arguments = _seqflow.client_arguments

__all__ = ["Client", "RemoteConfig", "StaleSampleError"]

# A BatchMeta names a sample that is gone or whose global index holds another
# sample now (cleared and reused, or partition_ids naming another partition).
# A KeyError: callers that caught KeyError for a cleared sample still do.
StaleSampleError = _seqflow.StaleSampleError

_DEFAULT_TIMEOUT = 30.0
_DEFAULT_BUSY_POLL_US = 200  # RemoteOptions::busy_poll's default
_META_MODES = ("fetch", "force_fetch", "insert")


def _config_timeout(settings: dict) -> float:
    return settings.get("timeout", settings.get("controller.timeout", _DEFAULT_TIMEOUT))


@dataclasses.dataclass(frozen=True)
class RemoteConfig:
    """How to reach a controller service. Picklable: a DataLoader worker
    process (or any other process) connects a client of its own from it.

    address: the controller service, e.g. "tcp://10.0.0.1:5555".
    timeout: seconds without a reply before a call raises TimeoutError (a
        waiting fetch gets its own wait on top); also the default fetch wait.
    polling_mode: the default of get_meta(polling=...).
    server_public_key_file, client_key_file: CURVE (both or neither): the
        cluster's .pub file and this client's .key file (seqflow keygen).
    local_copy: storage units on this host move large puts and gets through
        memory (one copy by the kernel) instead of TCP; units elsewhere are
        detected and get the bytes. False: always TCP.
    busy_poll_us: a control call (get_meta, insert, ...) waiting for its
        reply spins for up to this many microseconds before it sleeps: a
        short call then skips a thread wake-up (20-40 us on a VM). It spins
        only while replies come that fast and while the process waits on
        fewer calls than it has cores. 0: always sleep.
    """

    address: str
    timeout: float = _DEFAULT_TIMEOUT
    polling_mode: bool = False
    server_public_key_file: Optional[str] = None
    client_key_file: Optional[str] = None
    local_copy: bool = True
    busy_poll_us: int = _DEFAULT_BUSY_POLL_US

    def __post_init__(self):
        timeout, busy_poll_us = _arguments.remote_config_checks(
            self.address, self.timeout, self.polling_mode, self.server_public_key_file, self.client_key_file,
            self.local_copy, self.busy_poll_us)
        object.__setattr__(self, "timeout", timeout)
        object.__setattr__(self, "busy_poll_us", busy_poll_us)

    @classmethod
    def from_config(cls, config, address: Optional[str] = None) -> "RemoteConfig":
        """controller.address (or `address`), timeout (or controller.timeout),
        controller.polling_mode, security.server_public_key_file,
        security.client_key_file, local_copy and busy_poll_us of a TransferQueue-style config
        (checked: see seqflow._config.read_config)."""
        settings = read_config(config)
        return cls(address if address is not None else settings.get("controller.address"),
                   _config_timeout(settings), settings.get("controller.polling_mode", False),
                   settings.get("security.server_public_key_file"), settings.get("security.client_key_file"),
                   settings.get("local_copy", True), settings.get("busy_poll_us", _DEFAULT_BUSY_POLL_US))

    def connect(self):
        """The native client; waits up to `timeout` for the controller and its storage units."""
        keys = ("", "", "")
        if self.client_key_file is not None:
            server_key, _ = _seqflow.server.read_key_file(os.fspath(self.server_public_key_file))
            public, secret = _seqflow.server.read_key_file(os.fspath(self.client_key_file))
            if secret is None:
                raise ValueError(f"client_key_file {self.client_key_file!r} holds no secret key; give the .key "
                                 "file of this client's pair (seqflow keygen), not a .pub file")
            keys = (server_key, public, secret)
        return _native.Client.remote(self.address, self.timeout, *keys, bool(self.polling_mode), self.local_copy,
                                     self.busy_poll_us)


# Remote clients of this process, re-connected in a child after fork.
_REMOTE_CLIENTS: "weakref.WeakSet[Client]" = weakref.WeakSet()


class Client:
    """A client: embedded (controller and storage in this process; this
    constructor) or remote (Client.remote; services reached over ZeroMQ).

    sampler: a BaseSampler instance or subclass, or a name (default sequential).
    polling_mode: the default of get_meta(polling=...): True returns an empty
        batch at once when too little is ready; False waits up to `timeout`.
    max_bytes, max_samples: storage capacity (0: unlimited).
    timeout: seconds a non-polling fetch waits by default.
    """

    def __init__(self, sampler=None, *, polling_mode: bool = False, max_bytes: int = 0, max_samples: int = 0,
                 timeout: float = _DEFAULT_TIMEOUT, sampler_args: Optional[dict] = None):
        self.sampler = sampler
        self.timeout = check_seconds(timeout, "timeout")
        if sampler_args is not None:
            check_instance(sampler_args, "sampler_args", Mapping, "a dict or None")
        self.remote_config: Optional[RemoteConfig] = None
        self._services = None
        self._native = _native.Client(native_sampler(sampler, sampler_args), check_bool(polling_mode, "polling_mode"),
                                      check_count(max_bytes, "max_bytes"), check_count(max_samples, "max_samples"))

    @classmethod
    def remote(cls, address: str, *, timeout: float = _DEFAULT_TIMEOUT, polling_mode: bool = False,
               server_public_key_file: Optional[str] = None, client_key_file: Optional[str] = None,
               local_copy: bool = True, busy_poll_us: int = _DEFAULT_BUSY_POLL_US) -> "Client":
        """A client of the controller service at `address` (see RemoteConfig).
        Raises TimeoutError when the controller or its storage units do not
        answer within `timeout`."""
        return cls._connect(RemoteConfig(address, timeout, polling_mode, server_public_key_file, client_key_file,
                                         local_copy, busy_poll_us))

    @classmethod
    def _connect(cls, config: RemoteConfig, services=None) -> "Client":
        self = cls.__new__(cls)
        self.sampler = None
        self.timeout = config.timeout
        self.remote_config = config
        self._services = services
        self._native = config.connect()
        _REMOTE_CLIENTS.add(self)
        return self

    @classmethod
    def from_config(cls, config=None) -> "Client":
        """TransferQueue's config keys: controller.sampler (instance, class or
        name), controller.sampler_args, controller.polling_mode,
        controller.timeout (seconds), backend.SimpleStorage.total_storage_size
        (samples); seqflow's storage.max_bytes and storage.max_samples.
        Remote when controller.address is set (see RemoteConfig.from_config);
        the sampler and the storage settings belong to the services then.
        Every key is checked (see seqflow._config.read_config)."""
        settings = read_config(config)
        if "controller.address" in settings:
            return cls._connect(RemoteConfig.from_config(config))
        return cls(
            settings.get("controller.sampler"),
            polling_mode=settings.get("controller.polling_mode", False),
            max_bytes=settings.get("storage.max_bytes", 0),
            max_samples=settings.get("storage.max_samples",
                                     settings.get("backend.SimpleStorage.total_storage_size", 0)),
            timeout=_config_timeout(settings),
            sampler_args=settings.get("controller.sampler_args"),
        )

    @property
    def is_remote(self) -> bool:
        return self.remote_config is not None

    @property
    def _client(self):
        native = self._native
        if native is None:
            raise RuntimeError("this seqflow client is closed")
        if native is _RECONNECT:  # first call in a child process after fork
            with _LOCK:
                if self._native is _RECONNECT:
                    self._native = self.remote_config.connect()
                native = self._native
        return native

    @property
    def polling_mode(self) -> bool:
        return self._client.polling_mode

    def close(self) -> None:
        """Releases the controller and the storage (arrays already returned
        stay valid); stops the services this client started (Ray)."""
        self._native = None
        services, self._services = self._services, None
        if services is not None:
            services.stop()

    def __getstate__(self):
        if self.remote_config is None:
            raise TypeError("an embedded seqflow client cannot be pickled: its controller and storage live in this "
                            "process. Use a remote client (seqflow serve, or seqflow.init(backend='ray'))")
        return {"remote_config": self.remote_config, "timeout": self.timeout, "allow_pickle": self.allow_pickle}

    def __setstate__(self, state):
        self.sampler = None
        self.timeout = state["timeout"]
        self.allow_pickle = state.get("allow_pickle", False)
        self.remote_config = state["remote_config"]
        self._services = None  # the services stay with the process that started them
        self._native = _RECONNECT  # connects on first use
        _REMOTE_CLIENTS.add(self)

    # ---- data -------------------------------------------------------------
    # Non-tensor values that are not plain (None, bool, int, float, str, bytes,
    # lists and str-keyed dicts of them) are stored pickled only when allowed:
    # reading a pickle runs code of whoever wrote it. Set it on the client, or
    # pass allow_pickle= to put / get_data / kv_* calls.
    allow_pickle: bool = False

    def _pickle(self, allow_pickle: Optional[bool]) -> bool:
        return self.allow_pickle if allow_pickle is None else check_bool(allow_pickle, "allow_pickle")

    def put(self, data, metadata: Optional[BatchMeta] = None, partition_id: Optional[str] = None,
            custom_meta: Optional[Sequence[dict]] = None, *, allow_pickle: Optional[bool] = None) -> BatchMeta:
        """Without metadata: new samples in partition_id, one per row of data.
        With metadata: more fields of those samples. custom_meta (one dict per
        sample; default metadata.custom_meta) becomes visible with the data.
        Which values a field may hold: see seqflow._convert; allow_pickle
        (default: the client's) lets other objects be stored pickled."""
        if metadata is None:
            check_name(partition_id, "partition_id")
        else:
            check_instance(metadata, "metadata", BatchMeta, "a BatchMeta or None")
        custom_meta = _arguments.checked_custom_meta(custom_meta)
        columns = _convert.to_columns(data, borrow=self.is_remote, allow_pickle=self._pickle(allow_pickle))
        rows = metadata.size if metadata is not None else columns[0].sample_count if columns else 0
        if custom_meta is not None and not custom_meta and rows:
            # The engine takes an empty list as none; a caller's [] for rows is a wrong length (its words).
            raise ValueError(f"custom_meta holds 0 entries for {rows} samples; give one object per sample")
        if metadata is None:
            native = self._client.put_new(partition_id, columns, custom_meta)
        else:
            changed = metadata._changed_custom_meta()
            if custom_meta is None and changed is not None and any(changed):
                custom_meta = changed
            native = self._client.put_existing(metadata._to_native(), columns, custom_meta)
            return BatchMeta._from_native(native, extra_info=metadata.extra_info)
        return BatchMeta._from_native(native)

    def get_meta(self, data_fields, batch_size: int, partition_id: str, mode: str = "fetch",
                 task_name: Optional[str] = None, sampling_config: Optional[Mapping[str, Any]] = None, *,
                 timeout: Optional[float] = None, polling: Optional[bool] = None) -> BatchMeta:
        """fetch: ready samples through the sampler, consumed for task_name;
        force_fetch: every sample of the partition, also those lacking a
        field (their production status says so), nothing consumed; insert:
        new empty samples. sampling_config: {"dp_rank": r, "batch_index": b,
        ...}: the sampler gets every key as a keyword argument, as in
        TransferQueue (dp_rank only when given; values JSON/MessagePack-able).
        polling (default the client's polling_mode): an empty batch at once
        when too little is ready; otherwise wait up to timeout seconds, then
        TimeoutError. A partition that does not exist has nothing ready: a
        waiting fetch waits for it to be created and filled."""
        fields = check_names(data_fields, "data_fields")
        batch_size = check_int64(batch_size, "batch_size")
        check_name(partition_id, "partition_id")
        check_choice(mode, "mode", _META_MODES)
        check_optional_name(task_name, "task_name")
        dp_rank, batch_index, extra = _arguments.sampling_parts(sampling_config)
        timeout = self.timeout if timeout is None else check_seconds(timeout, "timeout", allow_zero=True)
        native = self._client.get_meta(fields, batch_size, partition_id, mode, task_name or "", dp_rank,
                                       batch_index, extra, check_optional_bool(polling, "polling"), timeout)
        return BatchMeta._from_native(native)

    def get_data(self, metadata: BatchMeta, *, fields: Optional[Iterable[str]] = None, format: str = "auto",
                 copy: bool = True, layout: str = "dense", allow_pickle: Optional[bool] = None):
        """The data of metadata's samples (its fields, or `fields`): a
        TensorDict when tensordict is installed, else a dict (format: "auto",
        "tensordict", "torch", "numpy"); non-tensor fields as a NonTensorStack
        or a list, one value per sample.

        copy (default): the arrays are the caller's, so writing into them
        changes nothing stored. copy=False: no copy where the samples lie back
        to back in storage; numpy arrays are then read-only views, torch
        tensors share the stored bytes (torch has no read-only tensors:
        writing into one changes what every reader gets; clone it first).
        layout "dense": rows of one shape as one tensor, others nested;
        "transfer_queue": TransferQueue's containers, nested unless every row
        is 0-d (see seqflow._convert). allow_pickle (default: the client's):
        read values stored pickled."""
        check_instance(metadata, "metadata", BatchMeta, "a BatchMeta")
        fmt = _convert.resolve_format(format, layout)
        names = metadata.field_names if fields is None else check_names(fields, "fields")
        copy = check_bool(copy, "copy")
        allow_pickle = self._pickle(allow_pickle)
        native = {}
        if metadata.size:
            # A remote get's buffers are this call's own already: copying them again would be waste.
            fresh = copy and not self.is_remote
            native = self._client.get_data(metadata, names, _convert.nested_flags(names, metadata), fresh,
                                           copy or fmt != "numpy", allow_pickle)
        return _convert.from_native(names, native, metadata, fmt, layout)

    def set_custom_meta(self, metadata: BatchMeta) -> None:
        """Merges metadata.custom_meta into the controller's, key by key."""
        check_instance(metadata, "metadata", BatchMeta, "a BatchMeta")
        if metadata.size == 0:
            return
        self._client.set_custom_meta(metadata, metadata.custom_meta)

    # ---- clearing and consumption ----------------------------------------
    def clear_partition(self, partition_id: str) -> None:
        """Removes the partition: its samples, their data, consumption and
        keys. A partition that does not exist (never made, or cleared) is
        left as it is, as in TransferQueue."""
        self._client.clear_partition(check_name(partition_id, "partition_id"))

    def clear_samples(self, metadata: BatchMeta) -> None:
        """Removes these samples and their data; the partition stays (listed,
        maybe empty). Samples already cleared are skipped."""
        check_instance(metadata, "metadata", BatchMeta, "a BatchMeta")
        self._client.clear_samples(metadata)

    def reset_consumption(self, partition_id: str, task_name: Optional[str] = None) -> bool:
        """Makes every sample unconsumed again for task_name (None: every
        task), so the same data can be fetched again. True, as in
        TransferQueue, also for a partition that does not exist."""
        self._client.reset_consumption(check_name(partition_id, "partition_id"),
                                       check_optional_name(task_name, "task_name"))
        return True

    # ---- status -----------------------------------------------------------
    def get_consumption_status(self, task_name: str, partition_id: str):
        """(global indexes ascending (int64), consumed-by-task flags (bool));
        (None, None) for a partition that does not exist, as in
        TransferQueue."""
        return self._client.consumption_status(check_name(task_name, "task_name"),
                                               check_name(partition_id, "partition_id"))

    def check_consumption_status(self, task_name: str, partition_id: str) -> bool:
        """True when the partition has samples and the task consumed all of
        them; False for a partition that does not exist."""
        return self._client.all_consumed(check_name(task_name, "task_name"), check_name(partition_id, "partition_id"))

    def get_production_status(self, data_fields, partition_id: str, *, per_field: bool = False):
        """(global indexes ascending (int64), flags (bool)): per sample, all
        of data_fields produced; with per_field, one column per field
        (TransferQueue's layout: shape (samples, fields)). A field no sample
        of the partition ever had is produced nowhere. (None, None) for a
        partition that does not exist, as in TransferQueue."""
        check_bool(per_field, "per_field")
        indexes, produced = self._client.production_status(check_names(data_fields, "data_fields"),
                                                           check_name(partition_id, "partition_id"))
        if produced is None or per_field:
            return indexes, produced
        return indexes, produced.all(axis=1)

    def check_production_status(self, data_fields, partition_id: str) -> bool:
        """True when the partition has samples and all of them have the
        fields; False for a partition that does not exist."""
        return self._client.all_produced(check_names(data_fields, "data_fields"),
                                         check_name(partition_id, "partition_id"))

    def get_partition_list(self) -> list[str]:
        """Partitions from their first put (or key) until clear_partition;
        clear_samples and kv_clear leave them listed."""
        return self._client.partition_list()

    def stats(self) -> dict:
        """Storage use: {"samples": ..., "bytes": ...}."""
        return self._client.storage_stats()

    # ---- key-value API ----------------------------------------------------
    def kv_put(self, key: str, partition_id: str, fields=None, tag: Optional[dict] = None, *,
               allow_pickle: Optional[bool] = None) -> KVBatchMeta:
        """One sample under `key`: fields maps field name to its value (no
        batch dimension: a tensor or numeric array is the row; any other value,
        numbers included, is a non-tensor value, as in TransferQueue); tag is
        merged into the sample's custom_meta."""
        check_name(key, "key")
        check_name(partition_id, "partition_id")
        check_tag(tag, "tag")
        allow_pickle = self._pickle(allow_pickle)  # checked with or without fields
        if fields is None and tag is None:
            raise ValueError("kv_put needs fields or a tag")
        columns = [] if fields is None else _convert.single_sample_columns(
            fields, borrow=self.is_remote, allow_pickle=allow_pickle)
        return self._kv_put([key], partition_id, columns, None if tag is None else [tag])

    def kv_batch_put(self, keys: Sequence[str], partition_id: str, fields=None,
                     tags: Optional[Sequence[dict]] = None, *, allow_pickle: Optional[bool] = None) -> KVBatchMeta:
        """Samples under `keys`; fields holds one row per key (as in put)."""
        keys = check_names(keys, "keys")
        check_name(partition_id, "partition_id")
        if not keys:
            raise ValueError("kv_batch_put of no keys: keys must name at least one sample")
        tags = _arguments.checked_tags(tags, len(keys))
        allow_pickle = self._pickle(allow_pickle)  # checked with or without fields
        if fields is None and tags is None:
            raise ValueError("kv_batch_put needs fields or tags")
        columns = [] if fields is None else _convert.to_columns(
            fields, borrow=self.is_remote, allow_pickle=allow_pickle, parameter="fields")
        return self._kv_put(keys, partition_id, columns, tags)

    def _kv_put(self, keys, partition_id, columns, tags) -> KVBatchMeta:
        meta = BatchMeta._from_native(self._client.kv_put(partition_id, keys, tags, columns))
        return KVBatchMeta._of_owned(list(keys), meta.custom_meta, partition_id, meta._produced_fields(),
                                     meta.extra_info)

    def kv_batch_get(self, keys, partition_id: str, select_fields=None, *, format: str = "auto",
                     copy: bool = True, layout: str = "dense", allow_pickle: Optional[bool] = None):
        """The data under `keys` (every field they all hold, or select_fields),
        as get_data returns it (format, copy, layout, allow_pickle: see
        get_data). A missing key raises KeyError naming it; a field some key
        lacks, ValueError."""
        keys = check_names(keys, "keys")
        check_name(partition_id, "partition_id")
        if select_fields is not None:
            select_fields = check_names(select_fields, "select_fields")
        meta = BatchMeta._from_native(self._client.kv_meta(partition_id, keys))
        if select_fields is None:
            fields = meta._produced_fields()
        else:
            fields = select_fields
            produced = meta._field_produced(fields)
            for j, f in enumerate(fields):
                if not produced[:, j].all():
                    missing = [keys[i] for i in np.flatnonzero(~produced[:, j])]
                    raise ValueError(f"field {f!r} is not set for keys {missing} of partition {partition_id!r}")
            meta = meta.select_fields(fields)
        return self.get_data(meta, fields=fields, format=format, copy=copy, layout=layout, allow_pickle=allow_pickle)

    def kv_batch_get_by_meta(self, meta: KVBatchMeta, select_fields=None, **kwargs):
        """kv_batch_get of meta's keys (and fields, unless select_fields)."""
        check_instance(meta, "meta", KVBatchMeta, "a KVBatchMeta")
        return self.kv_batch_get(meta.keys, meta.partition_id,
                                 meta.fields if select_fields is None else select_fields, **kwargs)

    def kv_meta(self, keys, partition_id: str, *, create: bool = False, missing: str = "error") -> BatchMeta:
        """The samples of `keys`, in the order given, for get_data; one
        controller call, whatever the partition's size. create=True makes
        samples (no fields yet) for unknown keys, and the partition if
        needed. Otherwise unknown keys raise KeyError naming the first
        (missing="error") or are left out (missing="skip"; a partition that
        does not exist then gives an empty BatchMeta)."""
        keys = check_names(keys, "keys")
        check_name(partition_id, "partition_id")
        check_bool(create, "create")
        check_choice(missing, "missing", ("error", "skip"))
        if create:
            native = self._client.kv_put(partition_id, keys, None, [])
        elif missing == "skip":
            native = self._client.kv_find(partition_id, keys)
        else:
            native = self._client.kv_meta(partition_id, keys)
        return BatchMeta._from_native(native)

    def kv_keys(self, global_indexes, partition_id: str) -> list[str]:
        """The key of each sample in `global_indexes`, in that order; one
        controller call. A sample without a key (or not in the partition)
        raises KeyError naming its global index."""
        indexes = check_int64_list(global_indexes, "global_indexes")
        return self._client.kv_keys(check_name(partition_id, "partition_id"), indexes)

    def kv_list(self, partition_id: Optional[str] = None) -> dict[str, dict[str, Any]]:
        """{partition_id: {key: tag}} for one partition or (None) for every
        partition, those without keys included (with {}). A partition that
        does not exist is left out: kv_list("gone") is {}."""
        return self._client.kv_list(check_optional_name(partition_id, "partition_id"))

    def kv_clear(self, keys, partition_id: str) -> None:
        """Removes the keys' samples and data; keys (or a partition) that do
        not exist are skipped, as in TransferQueue."""
        keys = check_names(keys, "keys")
        self._client.kv_clear(check_name(partition_id, "partition_id"), keys)

    # ---- measured workload --------------------------------------------------
    def report_timing(self, task_name: str, lengths, seconds: float) -> None:
        """How long one micro-batch of `task_name` took on this rank: the
        lengths of its sequences and its seconds (e.g. forward + backward).
        The controller fits the task's workload model to these timings in the
        background; samplers made with workload="online" balance it."""
        self.report_timings(task_name, [(lengths, seconds)])

    def report_timings(self, task_name: str, records) -> None:
        """report_timing for many micro-batches in one call: an iterable of
        (lengths, seconds) pairs or {"lengths": ..., "seconds": ...} dicts.
        A bad record raises ValueError naming it, and none is taken."""
        name = check_name(task_name, "task_name")
        self._client.report_timing(name, *timing_columns(records))

    def task_workload(self, task_name: str):
        """The task's TaskWorkload (workload, reports, fitted): its current
        fit, or the tokens prior until enough timings came; None before the
        task's first report."""
        return self._client.task_workload(check_name(task_name, "task_name"))

    # ---- checkpoints ------------------------------------------------------
    def save_checkpoint(self, directory: Union[str, os.PathLike], *, include_storage: bool = True,
                        metadata: Optional[Mapping[str, Any]] = None) -> None:
        """Controller (with the sampler's state) and storage, as one
        directory replaced atomically; a crash keeps the previous checkpoint.
        metadata (a JSON-able dict) is kept in the directory's metadata.json
        under "user_metadata", as TransferQueue keeps it; load_checkpoint
        returns it. include_storage=False is ignored, as TransferQueue ignores
        it for in-memory storage: the data would be lost otherwise."""
        path = check_path(directory, "directory")
        check_bool(include_storage, "include_storage")
        if metadata is not None:
            check_instance(metadata, "metadata", Mapping, "a dict (JSON-able) or None")
        self._client.save_checkpoint(path, None if metadata is None else dict(metadata))

    def load_checkpoint(self, directory: Union[str, os.PathLike]) -> dict[str, Any]:
        """Replaces the whole state; returns the metadata given to
        save_checkpoint ({} if none). A directory that holds no checkpoint
        raises FileNotFoundError naming it; a corrupt one ValueError; the
        state is unchanged after either."""
        path = check_path(directory, "directory")
        try:
            return self._client.load_checkpoint(path)
        except KeyError as error:
            raise FileNotFoundError(errno.ENOENT, error.args[0] if error.args else "no checkpoint", path) from None


_ASYNC_METHODS = (
    "put", "get_meta", "get_data", "set_custom_meta", "clear_partition", "clear_samples", "reset_consumption",
    "get_consumption_status", "check_consumption_status", "get_production_status", "check_production_status",
    "get_partition_list", "kv_put", "kv_batch_put", "kv_batch_get", "kv_batch_get_by_meta", "kv_meta", "kv_keys",
    "kv_list",
    "kv_clear", "save_checkpoint", "load_checkpoint", "report_timing", "report_timings", "task_workload",
)


for _name in _ASYNC_METHODS:
    setattr(Client, f"async_{_name}", async_twin(getattr(Client, _name)))


# ---- fork -------------------------------------------------------------------
_RECONNECT = object()  # a remote client's native handle, to be made on first use
_LOCK = threading.RLock()


def _after_fork_in_child() -> None:
    """A remote client's sockets belong to the parent: the child abandons them
    (never touches or frees them) and connects its own on first use."""
    global _LOCK
    _LOCK = threading.RLock()  # a copy held by another parent thread would never be released
    for client in list(_REMOTE_CLIENTS):
        native = client._native
        if native is not None and native is not _RECONNECT:
            native.abandon()
            client._native = _RECONNECT


os.register_at_fork(after_in_child=_after_fork_in_child)
