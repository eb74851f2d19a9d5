"""seqflow.Client and seqflow.RemoteConfig.

A Client checks its arguments, converts the caller's data (seqflow._convert)
and makes one call of the engine's client (_seqflow.client.NativeClient),
which releases the GIL: waiting never blocks other Python threads, and the
``async_<name>`` twins of the calls run them in a worker thread without
blocking the event loop. seqflow.default_client holds the process's default
client (``seqflow.init``) and the module-level functions."""

from __future__ import annotations

import dataclasses
import os
import threading
import weakref
from collections.abc import Mapping
from typing import Any, AsyncIterator, Iterable, Iterator, Optional, Sequence, Union

import numpy as np

from seqflow import _columns, _convert, _seqflow, _watch
from seqflow._async import async_twin
from seqflow._capacity import capacity_of_settings, storage_options
from seqflow._checks import (
    ArgumentTypeError,
    check_bool,
    check_choice,
    check_count,
    check_dicts,
    check_instance,
    check_int64,
    check_int64_list,
    check_list,
    check_name,
    check_names,
    check_optional_bool,
    check_optional_name,
    check_path,
    check_seconds,
    check_tag,
)
from seqflow._config import MAX_BUSY_POLL_US, read_config
from seqflow.balance import timing_columns
from seqflow.batch_meta import BatchMeta, KVBatchMeta
from seqflow.samplers import native_sampler

__all__ = ["Client", "RemoteConfig", "StaleSampleError"]

# A BatchMeta names a sample that is gone or whose global index holds another sample now (a KeyError).
StaleSampleError = _seqflow.StaleSampleError

_NativeClient = _seqflow.client.NativeClient
_DEFAULT_TIMEOUT = 30.0
_DEFAULT_BUSY_POLL_US = 200  # the engine's RemoteOptions::busy_poll
_MODES = ("fetch", "force_fetch", "insert")
# Keyword arguments seqflow always hands a sampler itself. task_name and
# partition_id are the request's unless sampling_config names them
# (TransferQueue hands samplers only sampling_config's, and its users put both there).
_SAMPLER_OWN_KEYWORDS = ("sample_info", "partition")

PathLike = Union[str, "os.PathLike[str]"]


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
        fewer calls than it has cores. 0: always sleep."""

    address: str
    timeout: float = _DEFAULT_TIMEOUT
    polling_mode: bool = False
    server_public_key_file: Optional[PathLike] = None
    client_key_file: Optional[PathLike] = None
    local_copy: bool = True
    busy_poll_us: int = _DEFAULT_BUSY_POLL_US

    def __post_init__(self) -> None:
        if not isinstance(self.address, str) or not self.address:
            raise ValueError(f"address must name the controller service (e.g. tcp://10.0.0.1:5555), "
                             f"got {self.address!r}")
        checked = {"timeout": check_seconds(self.timeout, "timeout"),
                   "polling_mode": check_bool(self.polling_mode, "polling_mode")}
        if (self.server_public_key_file is None) != (self.client_key_file is None):
            raise ValueError(f"CURVE needs both server_public_key_file and client_key_file, got "
                             f"{self.server_public_key_file!r} and {self.client_key_file!r}")
        if self.client_key_file is not None:
            check_path(self.server_public_key_file, "server_public_key_file")
            check_path(self.client_key_file, "client_key_file")
        checked["local_copy"] = check_bool(self.local_copy, "local_copy")
        checked["busy_poll_us"] = check_count(self.busy_poll_us, "busy_poll_us", maximum=MAX_BUSY_POLL_US)
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    # The fields as a tuple, as earlier versions pickled them (their pickles still load); checked again on
    # loading, as a pickle may come from elsewhere.
    def __getstate__(self) -> tuple[Any, ...]:
        return tuple(getattr(self, field.name) for field in dataclasses.fields(self))

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        checked = type(self)(*state)
        for field in dataclasses.fields(self):
            object.__setattr__(self, field.name, getattr(checked, field.name))

    @classmethod
    def from_config(cls, config: Any, address: Optional[str] = None) -> RemoteConfig:
        """controller.address (or `address`), timeout (or controller.timeout),
        controller.polling_mode, security.server_public_key_file,
        security.client_key_file, local_copy and busy_poll_us of a
        TransferQueue-style config (checked: see seqflow._config.read_config)."""
        settings = read_config(config)
        return cls(settings.get("controller.address") if address is None else address, _config_timeout(settings),
                   settings.get("controller.polling_mode", False),
                   settings.get("security.server_public_key_file"), settings.get("security.client_key_file"),
                   settings.get("local_copy", True), settings.get("busy_poll_us", _DEFAULT_BUSY_POLL_US))

    def connect(self) -> Client:
        """A client connected with these settings (Client._connect); waits up
        to `timeout` for the controller and its storage units."""
        return Client._connect(self)

    def _native(self) -> Any:
        key_files = (None, None)
        if self.client_key_file is not None:
            key_files = (check_path(self.server_public_key_file, "server_public_key_file"),
                         check_path(self.client_key_file, "client_key_file"))
        return _NativeClient.connect(self.address, self.timeout, *key_files, self.local_copy, self.busy_poll_us)


def _config_timeout(settings: dict[str, Any]) -> float:
    return settings.get("timeout", settings.get("controller.timeout", _DEFAULT_TIMEOUT))


# Remote clients of this process, whose connections a forked child abandons,
# and the lock that serializes connecting on first use (made anew in a forked
# child: a copy held by another parent thread would never be released).
_REMOTE_CLIENTS: weakref.WeakValueDictionary[int, Client] = weakref.WeakValueDictionary()  # by id(): any __eq__
_CONNECT_LOCK = threading.RLock()


def _after_fork_in_child() -> None:
    global _CONNECT_LOCK
    _CONNECT_LOCK = threading.RLock()
    for client in list(_REMOTE_CLIENTS.values()):
        client._abandon()


os.register_at_fork(after_in_child=_after_fork_in_child)


class Client:
    """A client: embedded (controller and storage in this process; this
    constructor) or remote (Client.remote; services reached over ZeroMQ).

    sampler: a BaseSampler instance or subclass, or a name (default sequential).
    polling_mode: the default of get_meta(polling=...): True returns an empty
        batch at once when too little is ready; False waits up to `timeout`.
    max_bytes, max_samples: storage capacity (0: unlimited); bytes count the
        values and their bookkeeping (stats()["overhead_bytes"]).
    max_bytes_per_partition, max_samples_per_partition: the same for each
        partition's samples (0: unlimited).
    when_full: "raise" (default): a put that does not fit raises ValueError
        ("storage full: ...") at once; "wait": it waits until clears make
        room, at most `timeout` seconds, then raises the same, saying it waited.
    high_watermark, low_watermark: fractions of each limit (0 < low <= high
        <= 1): puts stop fitting above high x limit; a limit that filled admits
        puts again only once its usage fell to low x limit (default: high).
    timeout: seconds a non-polling fetch waits by default, and a put that
        waits for room (when_full="wait") at most.
    timing_alignment: > 1 fits each task's workload model (report_timing) with
        a term for sequence lengths that are not a multiple of it, as
        seqflow.balance.calibrate(alignment=...) does (default 1: none).

    Errors: bad arguments raise ValueError, reading or writing samples, fields
    and keys that do not exist raises KeyError (StaleSampleError, a KeyError,
    for a BatchMeta whose samples were cleared, whose indexes hold other samples
    now, or whose partition_ids name another partition), a fetch that waited too
    long raises TimeoutError; the state is unchanged after any of them. A
    partition that does not exist (yet, or any more) is no error: fetches find
    nothing ready in it (a waiting fetch waits for it), status checks are False,
    clears and resets do nothing.

    allow_pickle (False; settable per client): non-tensor values that are not
    plain (None, bool, int, float, str, bytes, lists and str-keyed dicts of
    them) are stored pickled only when allowed: reading a pickle runs code of
    whoever wrote it. Calls that take allow_pickle= override it."""

    allow_pickle: bool = False
    sampler: Any
    """The sampler given to the constructor (None for a remote client)."""

    def __init__(self, sampler: Any = None, *, polling_mode: bool = False, max_bytes: int = 0, max_samples: int = 0,
                 timeout: float = _DEFAULT_TIMEOUT, sampler_args: Optional[Mapping[str, Any]] = None,
                 timing_alignment: int = 1, max_bytes_per_partition: int = 0, max_samples_per_partition: int = 0,
                 when_full: str = "raise", high_watermark: float = 1.0,
                 low_watermark: Optional[float] = None) -> None:
        seconds = check_seconds(timeout, "timeout")
        if sampler_args is not None:
            check_instance(sampler_args, "sampler_args", Mapping, "a dict or None")
        handle = native_sampler(sampler, sampler_args)
        polling = check_bool(polling_mode, "polling_mode")
        storage = storage_options(max_bytes=max_bytes, max_samples=max_samples,
                                  max_bytes_per_partition=max_bytes_per_partition,
                                  max_samples_per_partition=max_samples_per_partition, when_full=when_full,
                                  high_watermark=high_watermark, low_watermark=low_watermark, wait_timeout=seconds)
        alignment = check_count(timing_alignment, "timing_alignment", minimum=1)
        self._set_up(_NativeClient.embedded(handle, storage, alignment), polling, seconds, sampler, None, None)

    def _set_up(self, native: Any, polling_mode: bool, timeout: float, sampler: Any,
                remote_config: Optional[RemoteConfig], services: Any) -> None:
        self._state_lock = threading.Lock()  # guards _native, _connect_on_use and _services
        self._native = native  # None: closed, or (remote) not connected yet
        self._connect_on_use = native is None and remote_config is not None
        self._polling_mode = polling_mode
        self._remote_config = remote_config
        self._services = services  # the Ray services this client started, stopped by close()
        self.timeout = timeout
        self.sampler = sampler
        if remote_config is not None:
            _REMOTE_CLIENTS[id(self)] = self

    @classmethod
    def _remote_instance(cls, config: RemoteConfig, native: Any, timeout: float, services: Any) -> Client:
        """A `cls` (Client or a subclass) without running its __init__: a remote client of `config`."""
        self = cls.__new__(cls)
        self._set_up(native, config.polling_mode, timeout, None, config, services)
        return self

    @classmethod
    def _connect(cls, config: RemoteConfig, services: Any = None) -> Client:
        """A remote client of `config`; `services` (if given) are stopped by close()."""
        check_instance(config, "config", RemoteConfig, "a RemoteConfig")
        return cls._remote_instance(config, config._native(), config.timeout, services)

    @classmethod
    def _unpickled(cls, config: RemoteConfig, timeout: float, allow_pickle: Optional[bool]) -> Client:
        """A pickled remote client, connecting on first use."""
        check_instance(config, "config", RemoteConfig, "a RemoteConfig")
        self = cls._remote_instance(config, None, check_seconds(timeout, "timeout"), None)
        self.allow_pickle = bool(check_optional_bool(allow_pickle, "allow_pickle"))
        return self

    @classmethod
    def remote(cls, address: str, *, timeout: float = _DEFAULT_TIMEOUT, polling_mode: bool = False,
               server_public_key_file: Optional[PathLike] = None, client_key_file: Optional[PathLike] = None,
               local_copy: bool = True, busy_poll_us: int = _DEFAULT_BUSY_POLL_US) -> Client:
        """A client of the controller service at `address` (see RemoteConfig).
        Raises TimeoutError when the controller or its storage units do not
        answer within `timeout`."""
        return cls._connect(RemoteConfig(address, timeout, polling_mode, server_public_key_file, client_key_file,
                                         local_copy, busy_poll_us))

    @classmethod
    def from_config(cls, config: Any = None) -> Client:
        """TransferQueue's config keys: controller.sampler (instance, class or
        name), controller.sampler_args, controller.polling_mode,
        controller.timeout (seconds), backend.SimpleStorage.total_storage_size
        (samples, raise when full); seqflow's storage.max_bytes,
        storage.max_samples, storage.max_bytes_per_partition,
        storage.max_samples_per_partition, storage.when_full,
        storage.high_watermark, storage.low_watermark and
        controller.timing_alignment.
        Remote when controller.address is set (see RemoteConfig.from_config);
        the sampler and the storage settings belong to the services then.
        Every key is checked (see seqflow._config.read_config)."""
        settings = read_config(config)
        if "controller.address" in settings:
            return cls._connect(RemoteConfig.from_config(config))
        capacity = capacity_of_settings(settings)
        return cls(settings.get("controller.sampler"),
                   polling_mode=settings.get("controller.polling_mode", False),
                   timeout=_config_timeout(settings), sampler_args=settings.get("controller.sampler_args"),
                   timing_alignment=settings.get("controller.timing_alignment", 1), **capacity)

    # ---- life cycle ---------------------------------------------------------

    @property
    def timeout(self) -> float:
        """Seconds a non-polling fetch waits by default."""
        return self._timeout

    @timeout.setter
    def timeout(self, seconds: float) -> None:
        self._timeout = check_seconds(seconds, "timeout")

    @property
    def remote_config(self) -> Optional[RemoteConfig]:
        """The RemoteConfig of a remote client; None when embedded."""
        return self._remote_config

    @property
    def is_remote(self) -> bool:
        return self._remote_config is not None

    @property
    def polling_mode(self) -> bool:
        """The default of get_meta(polling=...)."""
        self._connected()
        return self._polling_mode

    def _connected(self) -> Any:
        """The engine's client: RuntimeError once closed; a remote client that
        has none yet (after fork, unpickled) connects here."""
        if self._connect_on_use:
            with _CONNECT_LOCK:
                if self._connect_on_use:
                    assert self._remote_config is not None
                    fresh = self._remote_config._native()  # waits without the GIL: close() may run meanwhile
                    with self._state_lock:
                        if self._connect_on_use:
                            self._native, fresh = fresh, None
                            self._connect_on_use = False
                    if fresh is not None:  # closed while connecting: stays closed
                        fresh.close()
        native = self._native
        if native is None:
            raise RuntimeError("this seqflow client is closed")
        return native

    def close(self) -> None:
        """Releases the controller and the storage (arrays already returned
        stay valid); stops the services this client started (Ray)."""
        with self._state_lock:  # two threads closing: one closes, one finds it closed
            native, self._native = self._native, None
            services, self._services = self._services, None
            self._connect_on_use = False
        if native is not None:
            native.close()
        if services is not None:
            services.stop()

    def _abandon(self) -> None:
        """After fork in a child: the parent's sockets are left alone, the next call connects anew."""
        if self._native is not None:
            self._native.abandon()
            self._native = None
            self._connect_on_use = True
        self._state_lock = threading.Lock()  # a copy held by another parent thread would never be released

    def __reduce__(self) -> tuple[Any, ...]:
        if not self.is_remote:
            raise TypeError("an embedded seqflow client cannot be pickled: its controller and storage live in this "
                            "process. Use a remote client (seqflow serve, or seqflow.init(backend='ray'))")
        # The services stay with the process that started them; the copy connects on first use.
        return type(self)._unpickled, (self._remote_config, self.timeout, self.allow_pickle)

    def _pickle_allowed(self, allow_pickle: Optional[bool]) -> bool:
        if allow_pickle is None:
            allow_pickle, parameter = self.allow_pickle, "Client.allow_pickle"
        else:
            parameter = "allow_pickle"
        return allow_pickle if type(allow_pickle) is bool else check_bool(allow_pickle, parameter)

    # ---- samples --------------------------------------------------------------

    def put(self, data: Any, metadata: Optional[BatchMeta] = None, partition_id: Optional[str] = None,
            custom_meta: Optional[Sequence[dict]] = None, *, allow_pickle: Optional[bool] = None) -> BatchMeta:
        """Without metadata: new samples in partition_id, one per row of data.
        With metadata: more fields of those samples. custom_meta (one dict per
        sample; default metadata.custom_meta) becomes visible with the data.
        Which values a field may hold: see seqflow._convert; allow_pickle
        (default: the client's) lets other objects be stored pickled."""
        if metadata is None:
            partition = check_name(partition_id, "partition_id")
        else:
            check_instance(metadata, "metadata", BatchMeta, "a BatchMeta or None")
        metas = None
        if custom_meta is not None:
            metas = check_list(custom_meta, "custom_meta", "a list of dicts (one per sample) or None")
            check_dicts(metas, "custom_meta")
        fields = _convert.field_inputs(data, borrow=self._remote_config is not None,
                                       allow_pickle=self._pickle_allowed(allow_pickle))
        if metas is not None and not metas:
            rows = metadata.size if metadata is not None else _columns.input_rows(fields[0])
            if rows:  # the engine takes an empty list as none; a caller's [] for rows is a wrong length
                raise ValueError(f"custom_meta holds 0 entries for {rows} samples; give one object per sample")
        native = self._connected()
        if metadata is None:
            return BatchMeta._of_native(native.put_new(partition, fields, metas))
        if metas is None:
            changed = metadata._changed_custom_meta()
            if changed is not None and any(changed):
                metas = list(changed)
        return BatchMeta._of_native(native.put_existing(metadata._engine_view(), fields, metas), metadata.extra_info)

    def get_meta(self, data_fields: Union[str, Iterable[str]], batch_size: int, partition_id: str,
                 mode: str = "fetch", task_name: Optional[str] = None,
                 sampling_config: Optional[Mapping[str, Any]] = None, *, timeout: Optional[float] = None,
                 polling: Optional[bool] = None, lease: Optional[float] = None) -> BatchMeta:
        """fetch: ready samples through the sampler, consumed for task_name;
        force_fetch: every sample of the partition, also those lacking a
        field (their production status says so), nothing consumed; insert:
        new empty samples. sampling_config: {"dp_rank": r, "batch_index": b,
        ...}: the sampler gets every key as a keyword argument, as in
        TransferQueue (dp_rank only when given; values JSON/MessagePack-able).
        polling (default the client's polling_mode): an empty batch at once
        when too little is ready; otherwise wait up to timeout seconds, then
        TimeoutError. A partition that does not exist has nothing ready: a
        waiting fetch waits for it to be created and filled.
        lease (fetch only, seconds, at most a week): the samples are consumed
        and leased to task_name for that long. ack(batch, task_name) keeps
        them consumed; release(batch, task_name), or no ack before the lease
        expires (the consumer died or stalled), gives them back, to be served
        again."""
        fields = check_names(data_fields, "data_fields")
        size = check_int64(batch_size, "batch_size")
        partition = check_name(partition_id, "partition_id")
        check_choice(mode, "mode", _MODES)
        task = check_optional_name(task_name, "task_name")
        dp_rank, batch_index, sampler_args = _sampling_config(sampling_config)
        seconds = self._timeout if timeout is None else check_seconds(timeout, "timeout", allow_zero=True)
        poll = check_optional_bool(polling, "polling")
        lease_seconds = 0.0 if lease is None else _lease_seconds(lease)
        native = self._connected()
        if poll is None:
            poll = self._polling_mode
        return BatchMeta._of_native(native.get_meta(partition, fields, size, mode, task or "", dp_rank, batch_index,
                                                    sampler_args, poll, seconds, lease_seconds))

    def get_data(self, metadata: BatchMeta, *, fields: Optional[Iterable[str]] = None, format: str = "auto",
                 copy: bool = True, layout: str = "dense", allow_pickle: Optional[bool] = None) -> Any:
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
        names = list(metadata.field_names) if fields is None else check_names(fields, "fields")
        fresh_copy = check_bool(copy, "copy")
        pickled = self._pickle_allowed(allow_pickle)
        nested = _convert.nested_flags(names, metadata)
        # A batch of no samples asks no one (not even a client that would connect on first use).
        native = self._connected() if metadata.size else None
        # A remote get's buffers are this call's own already: copying them again would be waste.
        fields_out = _seqflow.client.get_data(native, metadata._native, metadata.field_schema, names, nested, fmt,
                                              layout, fresh_copy and not self.is_remote, fresh_copy or fmt != "numpy",
                                              pickled, _convert.container)
        return _convert.as_result(fields_out, metadata.size, fmt)

    def set_custom_meta(self, metadata: BatchMeta) -> None:
        """Merges metadata.custom_meta into the controller's, key by key."""
        check_instance(metadata, "metadata", BatchMeta, "a BatchMeta")
        if metadata.size:
            self._connected().set_custom_meta(metadata._native, list(metadata.custom_meta))

    def clear_partition(self, partition_id: str) -> None:
        """Removes the partition: its samples, their data, consumption and
        keys. A partition that does not exist (never made, or cleared) is
        left as it is, as in TransferQueue."""
        partition = check_name(partition_id, "partition_id")
        self._connected().clear_partition(partition)

    def clear_samples(self, metadata: BatchMeta) -> None:
        """Removes these samples and their data; the partition stays (listed,
        maybe empty). Samples already cleared are skipped."""
        check_instance(metadata, "metadata", BatchMeta, "a BatchMeta")
        self._connected().clear_samples(metadata._native)

    def reset_consumption(self, partition_id: str, task_name: Optional[str] = None) -> bool:
        """Makes every sample unconsumed again for task_name (None: every
        task), so the same data can be fetched again. True, as in
        TransferQueue, also for a partition that does not exist."""
        partition = check_name(partition_id, "partition_id")
        task = check_optional_name(task_name, "task_name")
        self._connected().reset_consumption(partition, task)
        return True

    def ack(self, metadata: BatchMeta, task_name: str) -> int:
        """Acknowledges a batch fetched with a lease: its samples stay consumed
        by task_name and are never served to it again. Returns how many
        leases it ended: fewer than metadata.size when some expired first
        (they went back and may be served again)."""
        return self._end_leases(metadata, task_name, release=False)

    def release(self, metadata: BatchMeta, task_name: str) -> int:
        """Gives a leased batch back now (unconsumed, in arrival order), to be
        served again, as its lease's expiry would. Returns how many leases it
        ended."""
        return self._end_leases(metadata, task_name, release=True)

    def _end_leases(self, metadata: BatchMeta, task_name: str, *, release: bool) -> int:
        check_instance(metadata, "metadata", BatchMeta, "a BatchMeta")
        task = check_name(task_name, "task_name")
        ended: int = self._connected().end_leases(metadata._native, task, release)
        return ended

    def get_consumption_status(self, task_name: str,
                               partition_id: str) -> tuple[Optional[np.ndarray], Optional[np.ndarray]]:
        """(global indexes ascending (int64), consumed-by-task flags (bool));
        (None, None) for a partition that does not exist, as in
        TransferQueue."""
        task = check_name(task_name, "task_name")
        partition = check_name(partition_id, "partition_id")
        return self._connected().consumption_status(task, partition)

    def check_consumption_status(self, task_name: str, partition_id: str) -> bool:
        """True when the partition has samples and the task consumed all of
        them; False for a partition that does not exist."""
        task = check_name(task_name, "task_name")
        partition = check_name(partition_id, "partition_id")
        return self._connected().all_consumed(task, partition)

    def get_production_status(self, data_fields: Union[str, Iterable[str]], partition_id: str, *,
                              per_field: bool = False) -> tuple[Optional[np.ndarray], Optional[np.ndarray]]:
        """(global indexes ascending (int64), flags (bool)): per sample, all
        of data_fields produced; with per_field, one column per field
        (TransferQueue's layout: shape (samples, fields)). A field no sample
        of the partition ever had is produced nowhere. (None, None) for a
        partition that does not exist, as in TransferQueue."""
        each_field = check_bool(per_field, "per_field")
        names = check_names(data_fields, "data_fields")
        partition = check_name(partition_id, "partition_id")
        indexes, flags = self._connected().production_status(names, partition)
        if flags is None or each_field:
            return indexes, flags
        return indexes, flags.all(axis=1)  # all of the fields, per sample

    def check_production_status(self, data_fields: Union[str, Iterable[str]], partition_id: str) -> bool:
        """True when the partition has samples and all of them have the
        fields; False for a partition that does not exist."""
        names = check_names(data_fields, "data_fields")
        partition = check_name(partition_id, "partition_id")
        return self._connected().all_produced(names, partition)

    def get_partition_list(self) -> list[str]:
        """Partitions from their first put (or key) until clear_partition;
        clear_samples and kv_clear leave them listed."""
        return self._connected().partition_list()

    def stats(self) -> dict[str, int]:
        """Storage use: {"samples": ..., "bytes": ..., "overhead_bytes": ...} (bookkeeping memory
        per sample and value, an estimate; max_bytes bounds bytes + overhead_bytes)."""
        return self._connected().storage_stats()

    def capacity_stats(self) -> dict[str, int] | None:
        """What the storage's capacity did to puts, embedded: {"waiting_puts": ..., "puts_waited": ...,
        "puts_refused": ..., "full_answers": ...} ("no room" answers to waiting puts: each check after a
        wake-up). None remote, where each unit's metrics report them (docs/streaming.md)."""
        return self._connected().capacity_stats()

    # ---- timings --------------------------------------------------------------

    def report_timing(self, task_name: str, lengths: Any, seconds: float) -> None:
        """How long one micro-batch of `task_name` took on this rank: the
        lengths of its sequences and its seconds (e.g. forward + backward).
        The controller fits the task's workload model to these timings in the
        background; samplers made with workload="online" balance it."""
        Client.report_timings(self, task_name, [(lengths, seconds)])

    def report_timings(self, task_name: str, records: Iterable[Any]) -> None:
        """report_timing for many micro-batches in one call: an iterable of
        (lengths, seconds) pairs or {"lengths": ..., "seconds": ...} dicts.
        A bad record raises ValueError naming it, and none is taken."""
        task = check_name(task_name, "task_name")
        lengths, seconds = timing_columns(records)
        self._connected().report_timings(task, lengths, seconds)

    def task_workload(self, task_name: str) -> Optional[_seqflow.client.TaskWorkload]:
        """The task's TaskWorkload (workload, reports, fitted): its current
        fit, or the tokens prior until enough timings came; None before the
        task's first report."""
        task = check_name(task_name, "task_name")
        return self._connected().task_workload(task)

    # ---- checkpoints ----------------------------------------------------------

    def save_checkpoint(self, directory: PathLike, *, include_storage: bool = True,
                        metadata: Optional[Mapping[str, Any]] = None) -> None:
        """Controller (with the sampler's state) and storage, as one
        directory replaced atomically; a crash keeps the previous checkpoint.
        metadata (a JSON-able dict) is kept in the directory's metadata.json
        under "user_metadata", as TransferQueue keeps it; load_checkpoint
        returns it. include_storage=False is ignored, as TransferQueue ignores
        it for in-memory storage: the data would be lost otherwise."""
        path = check_path(directory, "directory")
        check_bool(include_storage, "include_storage")
        user_metadata: dict[str, Any] = {}
        if metadata is not None:
            user_metadata = dict(check_instance(metadata, "metadata", Mapping, "a dict (JSON-able) or None"))
        self._connected().save_checkpoint(path, user_metadata)

    def load_checkpoint(self, directory: PathLike) -> dict[str, Any]:
        """Replaces the whole state; returns the metadata given to
        save_checkpoint ({} if none). A directory that holds no checkpoint
        raises FileNotFoundError naming it; a corrupt one ValueError; the
        state is unchanged after either."""
        path = check_path(directory, "directory")
        return self._connected().load_checkpoint(path)

    # ---- keys -----------------------------------------------------------------

    def kv_put(self, key: str, partition_id: str, fields: Any = None, tag: Optional[dict] = None, *,
               allow_pickle: Optional[bool] = None) -> KVBatchMeta:
        """One sample under `key`: fields maps field name to its value (no
        batch dimension: a tensor or numeric array is the row; any other value,
        numbers included, is a non-tensor value, as in TransferQueue); tag is
        merged into the sample's custom_meta."""
        check_name(key, "key")
        partition = check_name(partition_id, "partition_id")
        check_tag(tag, "tag")
        pickled = self._pickle_allowed(allow_pickle)  # checked with or without fields
        if fields is None and tag is None:
            raise ValueError("kv_put needs fields or a tag")
        inputs = ([] if fields is None
                  else _convert.single_sample_inputs(fields, borrow=self.is_remote, allow_pickle=pickled))
        return self._kv_put_rows([key], partition, inputs, None if tag is None else [tag])

    def kv_batch_put(self, keys: Sequence[str], partition_id: str, fields: Any = None,
                     tags: Optional[Sequence[dict]] = None, *, allow_pickle: Optional[bool] = None) -> KVBatchMeta:
        """Samples under `keys`; fields holds one row per key (as in put)."""
        names = check_names(keys, "keys")
        partition = check_name(partition_id, "partition_id")
        if not names:
            raise ValueError("kv_batch_put of no keys: keys must name at least one sample")
        checked = _checked_tags(tags, len(names))
        pickled = self._pickle_allowed(allow_pickle)  # checked with or without fields
        if fields is None and checked is None:
            raise ValueError("kv_batch_put needs fields or tags")
        inputs = ([] if fields is None else _convert.field_inputs(fields, borrow=self.is_remote, allow_pickle=pickled,
                                                                  parameter="fields"))
        return self._kv_put_rows(names, partition, inputs, checked)

    def _kv_put_rows(self, keys: list[str], partition_id: str, inputs: list, tags: Optional[list]) -> KVBatchMeta:
        meta = BatchMeta._of_native(self._connected().kv_put(partition_id, keys, tags, inputs))
        return KVBatchMeta._of_owned(keys, meta.custom_meta, partition_id, meta._produced_fields(), meta.extra_info)

    def kv_batch_get(self, keys: Union[str, Iterable[str]], partition_id: str,
                     select_fields: Union[str, Iterable[str], None] = None, *, format: str = "auto",
                     copy: bool = True, layout: str = "dense", allow_pickle: Optional[bool] = None) -> Any:
        """The data under `keys` (every field they all hold, or select_fields),
        as get_data returns it (format, copy, layout, allow_pickle: see
        get_data). A missing key raises KeyError naming it; a field some key
        lacks, ValueError."""
        names = check_names(keys, "keys")
        partition = check_name(partition_id, "partition_id")
        fields = None if select_fields is None else check_names(select_fields, "select_fields")
        meta = BatchMeta._of_native(self._connected().kv_meta(partition, names, False))
        if fields is None:
            fields = meta._produced_fields()
        else:
            _check_fields_set(meta, fields, names, partition)
            meta = meta.select_fields(fields)
        # Client's own get_data: a subclass's override sees its callers' calls, not this one's (as before).
        return Client.get_data(self, meta, fields=fields, format=format, copy=copy, layout=layout,
                               allow_pickle=allow_pickle)

    def kv_batch_get_by_meta(self, meta: KVBatchMeta, select_fields: Union[str, Iterable[str], None] = None,
                             **kwargs: Any) -> Any:
        """kv_batch_get of meta's keys (and fields, unless select_fields)."""
        check_instance(meta, "meta", KVBatchMeta, "a KVBatchMeta")
        fields = meta.fields if select_fields is None else select_fields
        return self.kv_batch_get(meta.keys, meta.partition_id, fields, **kwargs)

    def kv_meta(self, keys: Union[str, Iterable[str]], partition_id: str, *, create: bool = False,
                missing: str = "error") -> BatchMeta:
        """The samples of `keys`, in the order given, for get_data; one
        controller call, whatever the partition's size. create=True makes
        samples (no fields yet) for unknown keys, and the partition if
        needed. Otherwise unknown keys raise KeyError naming the first
        (missing="error") or are left out (missing="skip"; a partition that
        does not exist then gives an empty BatchMeta)."""
        names = check_names(keys, "keys")
        partition = check_name(partition_id, "partition_id")
        make = check_bool(create, "create")
        skip = check_choice(missing, "missing", ("error", "skip")) == "skip"
        native = self._connected()
        return BatchMeta._of_native(native.kv_put(partition, names, None, []) if make
                                    else native.kv_meta(partition, names, skip))

    def kv_keys(self, global_indexes: Union[int, Iterable[int]], partition_id: str) -> list[str]:
        """The key of each sample in `global_indexes`, in that order; one
        controller call. A sample without a key (or not in the partition)
        raises KeyError naming its global index."""
        indexes = check_int64_list(global_indexes, "global_indexes")
        partition = check_name(partition_id, "partition_id")
        return self._connected().kv_keys(partition, indexes)

    def set_policy_version(self, version: int) -> None:
        """Sets the trainer's current policy version (0 until set): samples
        inserted from now on start at it, puts that complete a sample finish
        it at it. It never goes back: a smaller version raises ValueError
        naming both."""
        self._connected().set_policy_version(check_int64(version, "version"))

    def policy_version(self) -> int:
        """The trainer's current policy version (set_policy_version)."""
        return self._connected().policy_version()

    def policy_versions(self, partition_id: str, global_indexes: Union[int, Iterable[int], None] = None, *,
                        keys: Union[str, Iterable[str], None] = None) -> tuple[np.ndarray, np.ndarray]:
        """(start, finish) int64 arrays, one entry per sample named by
        `global_indexes` or (keyed samples) by `keys`, exactly one of them:
        the policy version current when the sample was inserted, and when a
        put last left it with every field of its partition produced (-1
        until then). One controller call. A sample not in the partition, or
        an unknown key, raises KeyError naming it."""
        partition = check_name(partition_id, "partition_id")
        if (global_indexes is None) == (keys is None):
            raise ValueError("policy_versions takes global_indexes or keys, exactly one of them")
        native = self._connected()
        if keys is not None:
            return native.kv_policy_versions(partition, check_names(keys, "keys"))
        return native.policy_versions(partition, check_int64_list(global_indexes, "global_indexes"))

    def kv_list(self, partition_id: Optional[str] = None) -> dict[str, dict[str, Any]]:
        """{partition_id: {key: tag}} for one partition or (None) for every
        partition, those without keys included (with {}). A partition that
        does not exist is left out: kv_list("gone") is {}."""
        partition = check_optional_name(partition_id, "partition_id")
        return self._connected().kv_list(partition)

    def kv_clear(self, keys: Union[str, Iterable[str]], partition_id: str) -> None:
        """Removes the keys' samples and data; keys (or a partition) that do
        not exist are skipped, as in TransferQueue."""
        names = check_names(keys, "keys")
        partition = check_name(partition_id, "partition_id")
        self._connected().kv_clear(partition, names)

    def replay_pass(self, partition_id: str, global_steps: int, batch_size: int, *, step: str = "sample",
                    mode: str = "async", max_off_policy_threshold: Optional[int] = None,
                    max_off_policy_strategy: str = "drop", group_filter_tag: Optional[str] = None,
                    evict: bool = True, refill_failed_groups: bool = False, max_inflight_prompts: int = 0,
                    gen_batch_size: int = 1, group_filter_metric: Optional[str] = None,
                    group_values: Optional[Mapping[str, Sequence[float]]] = None,
                    cursor: Optional[_seqflow.client.ReplayCursor] = None,
                    wait: float = 0.0, pass_id: Optional[int] = None,
                    lease: float = 60.0, balance_ranks: int = 0, balance_length_tag: str = "seq_len",
                    balance_workload: str = "verl",
                    max_staleness_versions: Optional[int] = None,
                    member_status: bool = False) -> _seqflow.client.ReplayPass:
        """One pass of verl's replay-buffer loop in the engine, over the
        partition's prompt keys ``{uid}`` (tags is_prompt, status,
        global_steps) and trajectory keys ``{uid}_...``: evicts stale
        (async ``drop``), filtered (``group_filter_tag``: a finished group
        whose trajectories share one value of that tag) and failed groups as
        verl's matrix says, tells how many prompts to refill, holds sampling
        while an in-flight prompt is at the threshold (``wait``) and, with
        ``step="sample"``, selects the ``batch_size`` oldest sampleable
        prompts, clears their prompt keys and answers their trajectory keys
        with tags. ``step="evict"`` stops before selecting, ``"count"``
        only counts. Pass the answer's ``cursor`` to the next pass of the
        same sample(). ``group_filter_metric`` filters on that metric's values,
        supplied by the caller instead of read from a tag: a pass answers the
        trajectory keys of finished groups it has no values for
        (``unclassified_keys``) and holds those groups in flight until a pass
        brings their ``group_values`` ({uid: one value per trajectory}). After a pass with nothing to do it waits up to
        ``wait`` seconds (at most 50 ms through a client: see docs) before
        answering.

        Exactly once: with ``pass_id`` (a positive integer, new for each
        pass) a pass that changes anything is kept for ``lease`` seconds
        (answer.kept): the same call again (its reply lost) gets the same
        answer, and its selected prompt keys are held, not cleared, until
        ack_replay_pass; unacknowledged when the lease ends, their groups are
        sampleable again. See docs/replay.md.

        ``balance_ranks`` (0: off) balances the selected trajectories over
        that many DP ranks as verl's trainer does after sampling
        (_balance_batch: verl's get_seqlen_balanced_partitions of the
        ``balance_workload`` costs of each trajectory's ``balance_length_tag``,
        equal counts per rank): keys and tags come rank by rank, and the answer
        says ``rank_sizes``, ``rank_lengths`` and ``arrival_rank_lengths``.

        ``max_staleness_versions`` (async; None: off) is staleness by policy
        version (set_policy_version): a group whose trajectories started at
        policy version ``start`` (the smallest among them) is stale when the
        current version - ``start`` exceeds it; ``max_off_policy_strategy``
        drops it when it finishes (counted in the cursor's metrics as
        ``off_policy/version_evicted_samples``) or holds sampling while it is
        in flight. With ``max_off_policy_threshold`` too, either makes a group
        stale.

        ``member_status`` follows each member's lifecycle too: a trajectory's
        tag ``status`` is "pending", "running", "finished", "failed" (or
        "failure") or "aborted" (absent: finished); a group is terminal when
        its prompt is and none of its trajectories is pending or running. Failed
        and aborted trajectories are never answered nor filtered on, and are
        cleared with their group (counted: the cursor's metric
        ``rollout_failure/left_out_trajectories``); a finished prompt whose
        trajectories all failed or were aborted is a failed group."""
        wait_ms = round(1000 * check_seconds(wait, "wait", allow_zero=True))
        kept_id, lease_ms = 0, 0
        if pass_id is not None:
            kept_id = check_count(pass_id, "pass_id", minimum=1)
            lease_ms = max(1, round(1000 * check_seconds(lease, "lease")))
        return self._connected().replay_pass(
            partition_id, global_steps, batch_size, step, mode, max_off_policy_threshold, max_off_policy_strategy,
            group_filter_tag, evict, refill_failed_groups, max_inflight_prompts, gen_batch_size, group_filter_metric,
            [] if group_values is None else [(uid, list(values)) for uid, values in group_values.items()],
            _seqflow.client.ReplayCursor() if cursor is None else cursor, wait_ms, kept_id, lease_ms,
            check_count(balance_ranks, "balance_ranks", minimum=0), check_name(balance_length_tag, "balance_length_tag"),
            check_instance(balance_workload, "balance_workload", str, "a str"), max_staleness_versions,
            check_instance(member_status, "member_status", bool, "a bool"))

    def ack_replay_pass(self, partition_id: str, pass_id: int) -> bool:
        """Acknowledges a kept replay pass (replay_pass(pass_id=...) whose
        answer.kept): its selected prompt keys are cleared. False when its
        lease ended first: its groups went back and may be sampled again, so
        the caller must not use its answer's selection. Acknowledging again
        answers True."""
        partition = check_name(partition_id, "partition_id")
        kept_id = check_count(pass_id, "pass_id", minimum=1)
        acknowledged: bool = self._connected().ack_replay_pass(partition, kept_id)
        return acknowledged

    def reissue_inflight_prompts(self, partition_id: str, global_steps: int, *,
                                 member_status: bool = False) -> _seqflow.client.ReissuedPrompts:
        """What verl's trainer does when it resumes, in one call under the
        controller's lock: every prompt key (tag is_prompt) whose status is
        'pending' or 'running' is tagged ``{"is_prompt": True, "status":
        "pending", "global_steps": global_steps}`` (merged into its tag) and
        its trajectory keys ``{uid}_...`` are cleared. Answers the re-issued
        prompt keys in arrival order and the count of cleared trajectories;
        nothing is listed across the boundary.

        ``member_status`` (as ``replay_pass``'s): a 'finished' or 'failure'
        prompt one of whose trajectories is tagged 'pending' or 'running' is
        re-issued too, whole (its generation died with the run; left alone
        it would stay in flight). See docs/replay.md."""
        partition = check_name(partition_id, "partition_id")
        steps = check_int64(global_steps, "global_steps")
        members = check_instance(member_status, "member_status", bool, "a bool")
        reissued: _seqflow.client.ReissuedPrompts = self._connected().reissue_inflight_prompts(partition, steps,
                                                                                               members)
        return reissued

    def watch(self, partition_id: str, *, key_prefix: Optional[str] = None, tag_field: Optional[str] = None,
              timeout: Optional[float] = None, max_changes: int = 1024) -> Iterator[_seqflow.client.Change]:
        """The partition's changes from now on, pushed, not polled: each a
        Change (kind 'inserted', 'produced', 'tagged', 'cleared' or
        'partition_cleared'; global_index, key, tag), oldest first. Only
        those of keys starting with ``key_prefix`` and (``tag_field``)
        whose new tag holds that field, filtered in the controller. An idle
        watch costs nothing per idle key. A change of kind 'resync' says
        changes were missed (the watcher fell more than 65,536 changes
        behind, or a checkpoint was loaded): re-read with kv_list. The
        iterator ends when the client closes (within a second) or, with a
        ``timeout``, when no change came for that many seconds. Watching
        starts here: changes after this call returns are never missed."""
        return _watch.changes(_watch.Watch(self, partition_id, key_prefix, tag_field, timeout, max_changes))

    def awatch(self, partition_id: str, *, key_prefix: Optional[str] = None, tag_field: Optional[str] = None,
               timeout: Optional[float] = None, max_changes: int = 1024) -> AsyncIterator[_seqflow.client.Change]:
        """watch() as an async iterator: each wait runs in a worker thread
        (the engine releases the GIL), so the event loop keeps going."""
        return _watch.async_changes(_watch.Watch(self, partition_id, key_prefix, tag_field, timeout, max_changes))


    # The calls in a worker thread, for asyncio (one line each, so that type checkers see every one).
    async_put = async_twin(put)
    async_get_meta = async_twin(get_meta)
    async_get_data = async_twin(get_data)
    async_set_custom_meta = async_twin(set_custom_meta)
    async_clear_partition = async_twin(clear_partition)
    async_clear_samples = async_twin(clear_samples)
    async_reset_consumption = async_twin(reset_consumption)
    async_ack = async_twin(ack)
    async_release = async_twin(release)
    async_get_consumption_status = async_twin(get_consumption_status)
    async_check_consumption_status = async_twin(check_consumption_status)
    async_get_production_status = async_twin(get_production_status)
    async_check_production_status = async_twin(check_production_status)
    async_get_partition_list = async_twin(get_partition_list)
    async_kv_put = async_twin(kv_put)
    async_kv_batch_put = async_twin(kv_batch_put)
    async_kv_batch_get = async_twin(kv_batch_get)
    async_kv_batch_get_by_meta = async_twin(kv_batch_get_by_meta)
    async_kv_meta = async_twin(kv_meta)
    async_kv_keys = async_twin(kv_keys)
    async_kv_list = async_twin(kv_list)
    async_kv_clear = async_twin(kv_clear)
    async_replay_pass = async_twin(replay_pass)
    async_ack_replay_pass = async_twin(ack_replay_pass)
    async_reissue_inflight_prompts = async_twin(reissue_inflight_prompts)
    async_save_checkpoint = async_twin(save_checkpoint)
    async_load_checkpoint = async_twin(load_checkpoint)
    async_report_timing = async_twin(report_timing)
    async_report_timings = async_twin(report_timings)
    async_task_workload = async_twin(task_workload)


def _lease_seconds(value: Any) -> float:
    """A lease's seconds: the engine counts whole milliseconds, at least one."""
    seconds = check_seconds(value, "lease")
    if round(seconds * 1000) < 1:
        raise ValueError(f"lease must be at least 0.001 seconds, got {value!r}")
    return seconds


def _sampling_config(sampling_config: Optional[Mapping[str, Any]]) -> tuple[Optional[int], int, Optional[dict]]:
    """get_meta's sampling_config as (dp_rank when given, batch_index, the other keys for the sampler)."""
    if sampling_config is None:
        return None, 0, None
    check_instance(sampling_config, "sampling_config", Mapping, "a dict or None")
    extra = {}
    for key, value in sampling_config.items():
        if not isinstance(key, str):
            raise ArgumentTypeError(f"sampling_config keys must be strings, got {key!r}")
        check_name(key, "sampling_config key")
        if key in _SAMPLER_OWN_KEYWORDS:
            raise ValueError(f"sampling_config[{key!r}] clashes with the sampler's own keyword argument {key!r}")
        if key not in ("dp_rank", "batch_index"):
            extra[key] = value
    dp_rank = sampling_config.get("dp_rank")
    batch_index = sampling_config.get("batch_index")
    return (None if dp_rank is None else check_count(dp_rank, "sampling_config['dp_rank']"),
            0 if batch_index is None else check_count(batch_index, "sampling_config['batch_index']"),
            extra or None)


def _checked_tags(tags: Optional[Sequence[dict]], keys: int) -> Optional[list]:
    """kv_batch_put's tags: None, or one tag per key, as a list."""
    if tags is None:
        return None
    entries = check_list(tags, "tags", "a list of dicts (one per key) or None")
    if len(entries) != keys:
        raise ValueError(f"{len(entries)} tags for {keys} keys")
    for i, entry in enumerate(entries):
        check_tag(entry, f"tags[{i}]")
    return entries


def _check_fields_set(meta: BatchMeta, fields: list[str], keys: list[str], partition_id: str) -> None:
    """A ValueError naming the keys that lack a selected field."""
    produced = meta._field_produced(fields)
    for j, field in enumerate(fields):
        missing = [keys[i] for i in np.flatnonzero(~produced[:, j])]
        if missing:
            raise ValueError(f"field {field!r} is not set for keys {missing!r} of partition {partition_id!r}")


# The calls that have an async_<name> twin.
_ASYNC_METHODS = tuple(name[len("async_"):] for name in vars(Client) if name.startswith("async_"))
