"""The client: TransferQueue's API over seqflow's controller and storage.

``seqflow.init(config)`` creates the process's default client (embedded: the
controller and the storage live in this process); ``seqflow.get_client()``
returns it and the module-level functions (``seqflow.put``,
``seqflow.get_meta``, ...) delegate to it. Every call also exists as
``async_<name>``, which runs the call in a worker thread: the C++ side
releases the GIL for every controller and storage call, so waiting never
blocks the event loop or other Python threads.

Errors: bad arguments raise ValueError, unknown partitions, fields, samples
and keys raise KeyError, a fetch that waited too long raises TimeoutError;
the state is unchanged after any of them.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import threading
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from seqflow import _convert, _seqflow
from seqflow.batch_meta import BatchMeta, KVBatchMeta
from seqflow.samplers import native_sampler

_native = _seqflow.client

__all__ = ["Client", "close", "get_client", "init"]

_DEFAULT_TIMEOUT = 30.0


def _get(config, path: str, default=None):
    """config["a"]["b"] for path "a.b", for dicts and OmegaConf configs alike."""
    node = config
    for key in path.split("."):
        if node is None:
            return default
        try:
            node = node.get(key) if hasattr(node, "get") else None
        except Exception:  # OmegaConf raises on missing keys in struct mode
            return default
    return default if node is None else node


def _as_list(values, name: str) -> list[str]:
    if isinstance(values, str):
        return [values]
    values = list(values)
    for i, v in enumerate(values):
        if not isinstance(v, str):
            raise ValueError(f"{name}[{i}] must be a string, got {v!r}")
    return values


def _count(value, name: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


class Client:
    """An embedded client: controller and storage in this process.

    sampler: a BaseSampler instance or subclass, or a name (default sequential).
    polling_mode: the default of get_meta(polling=...): True returns an empty
        batch at once when too little is ready; False waits up to `timeout`.
    max_bytes, max_samples: storage capacity (0: unlimited).
    timeout: seconds a non-polling fetch waits by default.
    """

    def __init__(self, sampler=None, *, polling_mode: bool = False, max_bytes: int = 0, max_samples: int = 0,
                 timeout: float = _DEFAULT_TIMEOUT, sampler_args: Optional[dict] = None):
        self.sampler = sampler
        self.timeout = float(timeout)
        self._native = _native.EmbeddedClient(native_sampler(sampler, sampler_args), bool(polling_mode),
                                              _count(max_bytes, "max_bytes"), _count(max_samples, "max_samples"))

    @classmethod
    def from_config(cls, config=None) -> "Client":
        """TransferQueue's config keys: controller.sampler (instance, class or
        name), controller.sampler_args, controller.polling_mode,
        controller.timeout (seconds), backend.SimpleStorage.total_storage_size
        (samples); seqflow's storage.max_bytes and storage.max_samples."""
        config = config or {}
        max_samples = _get(config, "storage.max_samples", None)
        if max_samples is None:
            max_samples = _get(config, "backend.SimpleStorage.total_storage_size", 0)
        return cls(
            _get(config, "controller.sampler", None),
            polling_mode=bool(_get(config, "controller.polling_mode", False)),
            max_bytes=int(_get(config, "storage.max_bytes", 0)),
            max_samples=int(max_samples),
            timeout=float(_get(config, "controller.timeout", _DEFAULT_TIMEOUT)),
            sampler_args=_get(config, "controller.sampler_args", None),
        )

    @property
    def _client(self):
        native = self._native
        if native is None:
            raise RuntimeError("this seqflow client is closed")
        return native

    @property
    def polling_mode(self) -> bool:
        return self._client.polling_mode

    def close(self) -> None:
        """Releases the controller and the storage (arrays already returned stay valid)."""
        self._native = None

    # ---- data -------------------------------------------------------------
    def put(self, data, metadata: Optional[BatchMeta] = None, partition_id: Optional[str] = None,
            custom_meta: Optional[Sequence[dict]] = None) -> BatchMeta:
        """Without metadata: new samples in partition_id, one per row of data.
        With metadata: more fields of those samples. custom_meta (one dict per
        sample; default metadata.custom_meta) becomes visible with the data."""
        columns = _convert.to_columns(data)
        if custom_meta is not None:
            custom_meta = list(custom_meta)
        if metadata is None:
            if not isinstance(partition_id, str) or not partition_id:
                raise ValueError(f"partition_id must name a partition when metadata is None, got {partition_id!r}")
            native = self._client.put_new(partition_id, columns, custom_meta)
        else:
            if custom_meta is None and any(metadata.custom_meta):
                custom_meta = metadata.custom_meta
            native = self._client.put_existing(metadata._to_native(), columns, custom_meta)
        return BatchMeta._from_native(native)

    def get_meta(self, data_fields, batch_size: int, partition_id: str, mode: str = "fetch",
                 task_name: Optional[str] = None, sampling_config: Optional[Mapping[str, Any]] = None, *,
                 timeout: Optional[float] = None, polling: Optional[bool] = None) -> BatchMeta:
        """fetch: ready samples through the sampler, consumed for task_name;
        force_fetch: every sample, nothing consumed; insert: new empty samples.
        sampling_config: {"dp_rank": r, "batch_index": b}. polling (default
        the client's polling_mode): an empty batch at once when too little is
        ready; otherwise wait up to timeout seconds, then TimeoutError."""
        config = dict(sampling_config or {})
        dp_rank = _count(config.get("dp_rank", 0) or 0, "sampling_config['dp_rank']")
        batch_index = _count(config.get("batch_index", 0) or 0, "sampling_config['batch_index']")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
            raise ValueError(f"batch_size must be an integer, got {batch_size!r}")
        native = self._client.get_meta(
            _as_list(data_fields, "data_fields"), int(batch_size), partition_id, mode, task_name or "",
            dp_rank, batch_index, polling, self.timeout if timeout is None else float(timeout))
        return BatchMeta._from_native(native)

    def get_data(self, metadata: BatchMeta, *, fields: Optional[Iterable[str]] = None, format: str = "auto",
                 copy: bool = False):
        """The data of metadata's samples (its fields, or `fields`): a
        TensorDict when tensordict is installed, else a dict (format: "auto",
        "tensordict", "torch", "numpy"). Without copy, arrays view the stored
        bytes when the samples lie back to back: numpy arrays are read-only,
        torch tensors share the stored bytes, so edit a clone."""
        fmt = _convert.resolve_format(format)
        names = metadata.field_names if fields is None else _as_list(fields, "fields")
        native = {}
        if metadata.size:
            native = self._client.get_data(metadata.global_indexes, names,
                                           _convert.nested_flags(names, metadata), fmt != "numpy")
        return _convert.from_native(names, native, metadata, fmt, copy)

    def set_custom_meta(self, metadata: BatchMeta) -> None:
        """Merges metadata.custom_meta into the controller's, key by key."""
        if metadata.size == 0:
            return
        self._client.set_custom_meta(metadata.partition_ids, metadata.global_indexes, metadata.custom_meta)

    # ---- clearing and consumption ----------------------------------------
    def clear_partition(self, partition_id: str) -> None:
        self._client.clear_partition(partition_id)

    def clear_samples(self, metadata: BatchMeta) -> None:
        for part in metadata.chunk_by_partition():
            self._client.clear_samples(part.partition_ids[0], part.global_indexes)

    def reset_consumption(self, partition_id: str, task_name: Optional[str] = None) -> None:
        self._client.reset_consumption(partition_id, task_name)

    # ---- status -----------------------------------------------------------
    def get_consumption_status(self, task_name: str, partition_id: str) -> tuple[np.ndarray, np.ndarray]:
        """(global indexes ascending, consumed-by-task flags)."""
        return self._client.consumption_status(task_name, partition_id)

    def check_consumption_status(self, task_name: str, partition_id: str) -> bool:
        """True when the partition has samples and the task consumed all of them."""
        return self._client.all_consumed(task_name, partition_id)

    def get_production_status(self, data_fields, partition_id: str) -> tuple[np.ndarray, np.ndarray]:
        """(global indexes ascending, all-fields-produced flags)."""
        return self._client.production_status(_as_list(data_fields, "data_fields"), partition_id)

    def check_production_status(self, data_fields, partition_id: str) -> bool:
        """True when the partition has samples and all of them have the fields."""
        return self._client.all_produced(_as_list(data_fields, "data_fields"), partition_id)

    def get_partition_list(self) -> list[str]:
        return self._client.partition_list()

    def stats(self) -> dict:
        """Storage use: {"samples": ..., "bytes": ...}."""
        return self._client.storage_stats()

    # ---- key-value API ----------------------------------------------------
    def kv_put(self, key: str, partition_id: str, fields=None, tag: Optional[dict] = None) -> KVBatchMeta:
        """One sample under `key`: fields maps field name to its value (no
        batch dimension); tag is merged into the sample's custom_meta."""
        if fields is None and tag is None:
            raise ValueError("kv_put needs fields or a tag")
        columns = _convert.single_sample_columns(fields) if fields is not None else []
        return self._kv_put([key], partition_id, columns, None if tag is None else [tag])

    def kv_batch_put(self, keys: Sequence[str], partition_id: str, fields=None,
                     tags: Optional[Sequence[dict]] = None) -> KVBatchMeta:
        """Samples under `keys`; fields holds one row per key."""
        if fields is None and tags is None:
            raise ValueError("kv_batch_put needs fields or tags")
        columns = _convert.to_columns(fields) if fields is not None else []
        return self._kv_put(_as_list(keys, "keys"), partition_id, columns, None if tags is None else list(tags))

    def _kv_put(self, keys, partition_id, columns, tags) -> KVBatchMeta:
        if tags is not None and len(tags) != len(keys):
            raise ValueError(f"{len(tags)} tags for {len(keys)} keys")
        meta = BatchMeta._from_native(self._client.kv_put(partition_id, keys, tags, columns))
        produced = [f for j, f in enumerate(meta.field_names) if meta.production_status[:, j].all()]
        return KVBatchMeta(keys=list(keys), tags=meta.custom_meta, partition_id=partition_id, fields=produced,
                           extra_info=meta.extra_info)

    def kv_batch_get(self, keys, partition_id: str, select_fields=None, *, format: str = "auto",
                     copy: bool = False):
        """The data under `keys` (every field they all hold, or select_fields).
        A missing key raises KeyError naming it; a field some key lacks,
        ValueError."""
        keys = _as_list(keys, "keys")
        meta = BatchMeta._from_native(self._client.kv_meta(partition_id, keys))
        if select_fields is None:
            fields = [f for j, f in enumerate(meta.field_names) if meta.production_status[:, j].all()]
        else:
            fields = _as_list(select_fields, "select_fields")
            meta = meta.select_fields(fields)
            for j, f in enumerate(fields):
                if not meta.production_status[:, j].all():
                    missing = [keys[i] for i in np.flatnonzero(~meta.production_status[:, j])]
                    raise ValueError(f"field {f!r} is not set for keys {missing} of partition {partition_id!r}")
        return self.get_data(meta, fields=fields, format=format, copy=copy)

    def kv_batch_get_by_meta(self, meta: KVBatchMeta, select_fields=None, **kwargs):
        return self.kv_batch_get(meta.keys, meta.partition_id,
                                 meta.fields if select_fields is None else select_fields, **kwargs)

    def kv_list(self, partition_id: Optional[str] = None) -> dict[str, dict[str, Any]]:
        """{partition_id: {key: tag}} for one partition or for all."""
        partitions = [partition_id] if partition_id is not None else self.get_partition_list()
        out = {}
        for p in partitions:
            entries = self._client.kv_list(p)
            if entries or partition_id is not None:
                out[p] = dict(entries)
        return out

    def kv_clear(self, keys, partition_id: str) -> None:
        self._client.kv_clear(partition_id, _as_list(keys, "keys"))

    # ---- checkpoints ------------------------------------------------------
    def save_checkpoint(self, directory: Union[str, os.PathLike]) -> None:
        """Controller (with the sampler's state) and storage, as one
        directory replaced atomically; a crash keeps the previous checkpoint."""
        self._client.save_checkpoint(os.fspath(directory))

    def load_checkpoint(self, directory: Union[str, os.PathLike]) -> None:
        """Replaces the whole state; on a missing or corrupt checkpoint raises
        (KeyError / ValueError) and leaves the state unchanged."""
        self._client.load_checkpoint(os.fspath(directory))


_ASYNC_METHODS = (
    "put", "get_meta", "get_data", "set_custom_meta", "clear_partition", "clear_samples", "reset_consumption",
    "get_consumption_status", "check_consumption_status", "get_production_status", "check_production_status",
    "get_partition_list", "kv_put", "kv_batch_put", "kv_batch_get", "kv_batch_get_by_meta", "kv_list",
    "kv_clear", "save_checkpoint", "load_checkpoint",
)


def _async_method(name: str):
    sync = getattr(Client, name)

    @functools.wraps(sync)
    async def method(self, *args, **kwargs):
        return await asyncio.to_thread(sync, self, *args, **kwargs)

    method.__name__ = method.__qualname__ = f"async_{name}"
    method.__doc__ = f"{name} in a worker thread, for asyncio (see Client.{name})."
    return method


for _name in _ASYNC_METHODS:
    setattr(Client, f"async_{_name}", _async_method(_name))


# ---- the default client ---------------------------------------------------
_LOCK = threading.Lock()
_DEFAULT: Optional[Client] = None


def init(config=None) -> Client:
    """Creates the default client from a TransferQueue-style config (dict or
    OmegaConf; see Client.from_config) and returns it. If one exists already
    it is returned and `config` is ignored, as in TransferQueue."""
    global _DEFAULT
    with _LOCK:
        if _DEFAULT is None:
            _DEFAULT = Client.from_config(config)
        return _DEFAULT


def get_client() -> Client:
    """The default client; seqflow.init() must have been called."""
    client = _DEFAULT
    if client is None:
        raise RuntimeError("seqflow is not initialized; call seqflow.init() first")
    return client


def close() -> None:
    """Closes the default client; the next init() creates a new one."""
    global _DEFAULT
    with _LOCK:
        if _DEFAULT is not None:
            _DEFAULT.close()
        _DEFAULT = None


def _module_function(name: str):
    method = getattr(Client, name)

    if inspect.iscoroutinefunction(method):
        async def function(*args, **kwargs):
            return await method(get_client(), *args, **kwargs)
    else:
        def function(*args, **kwargs):
            return method(get_client(), *args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"Client.{name} on the default client.\n\n{method.__doc__ or ''}"
    return function


API_FUNCTIONS = tuple(list(_ASYNC_METHODS) + [f"async_{n}" for n in _ASYNC_METHODS])
for _name in API_FUNCTIONS:
    globals()[_name] = _module_function(_name)
__all__ += list(API_FUNCTIONS)
