"""TransferQueue 0.1.11's module-level API (``transfer_queue.interface``):
init / close / get_client, the key-value calls, checkpoints and the metrics
endpoint, each with its ``async_`` twin; plus the client's data calls
(put, get_meta, get_data, ...) at module level for convenience."""

from __future__ import annotations

import functools
import logging
import os
from typing import Callable, Optional

from seqflow._async import async_twin
from seqflow.batch_meta import KVBatchMeta
from seqflow.compat.transfer_queue import _system
from seqflow.compat.transfer_queue.client import LAYOUT, TransferQueueClient, _keys_list, sorted_fields

logger = logging.getLogger("seqflow.compat.transfer_queue")

_CLIENT: Optional[TransferQueueClient] = None
_CLIENT_OF: Optional[_system.System] = None


def init(conf=None):
    """Joins the running system (any process of the job, e.g. a Ray worker or
    a spawned process), else starts one from `conf` merged over
    TransferQueue's defaults; the config key ``seqflow.mode`` picks where
    (see seqflow.compat.transfer_queue._system). Returns the config."""
    return _system.init(conf)


def close() -> None:
    """Closes this process's client; stops the system if this process
    started it."""
    global _CLIENT, _CLIENT_OF
    _CLIENT = _CLIENT_OF = None
    _system.close()


def get_client() -> TransferQueueClient:
    """This process's TransferQueueClient (init() first)."""
    global _CLIENT, _CLIENT_OF
    system = _system.require()
    if _CLIENT_OF is not system:
        _CLIENT = TransferQueueClient(f"TransferQueueClient_{os.getpid()}", seqflow_client=system.client)
        _CLIENT_OF = system
    return _CLIENT


def _seqflow():
    """The seqflow client behind get_client() (set up for TransferQueue's
    values: pickled objects allowed)."""
    return get_client().seqflow


def get_metrics_endpoint() -> Optional[str]:
    """HOST:PORT of the Prometheus endpoint (its metrics at
    http://HOST:PORT/metrics), None when metrics are off."""
    return _system.require().metrics_endpoint


# ---- key-value ----------------------------------------------------------------
def _parsed_fields(fields, data_parser: Optional[Callable]):
    if data_parser is None or fields is None:
        return fields
    from seqflow.compat.transfer_queue.client import _parsed

    return _parsed(fields, data_parser)


def _in_partition_dtypes(partition_id: str, fields):
    """`fields` with each tensor whose dtype differs from its field's dtype in
    the partition converted to that dtype, when that changes no value; None
    when no tensor differs or one would change. TransferQueue keeps a field's
    first dtype when a later put brings another: it logs the mismatch and
    reads the rows back in the first dtype."""
    import torch

    keys = list(_seqflow().kv_list(partition_id).get(partition_id, {}))
    if not keys or not hasattr(fields, "keys"):
        return None
    schema = _seqflow().kv_meta(keys, partition_id).field_schema
    converted, changed = fields.copy(), False
    for name in fields.keys():
        value = fields[name]
        existing = getattr(torch, str(schema.get(name, {}).get("dtype")), None)
        if not isinstance(value, torch.Tensor) or value.is_nested or not isinstance(existing, torch.dtype) \
                or value.dtype == existing:
            continue
        cast = value.to(existing)
        if not torch.equal(cast.to(value.dtype), value):
            return None
        logger.error("partition %r, field %r: dtype mismatch: existing=%s, incoming=%s; stored as %s (as "
                     "TransferQueue reads it back)", partition_id, name, existing, value.dtype, existing)
        converted[name], changed = cast, True
    return converted if changed else None


def _kv_write(partition_id: str, fields, write):
    try:
        return write(fields)
    except ValueError:  # a dtype conflict (seqflow's rule) that TransferQueue lets pass
        converted = _in_partition_dtypes(partition_id, fields) if fields is not None else None
        if converted is None:
            raise
        return write(converted)


def kv_put(key: str, partition_id: str, fields=None, tag: Optional[dict] = None,
           data_parser: Optional[Callable] = None) -> KVBatchMeta:
    if not isinstance(key, str):
        raise TypeError(f"key must be a string, got {type(key).__name__}")
    return _kv_write(partition_id, _parsed_fields(fields, data_parser),
                     lambda data: _seqflow().kv_put(key, partition_id, data, tag))


def kv_batch_put(keys: list, partition_id: str, fields=None, tags: Optional[list] = None,
                 data_parser: Optional[Callable] = None) -> KVBatchMeta:
    keys = _keys_list(keys)
    return _kv_write(partition_id, _parsed_fields(fields, data_parser),
                     lambda data: _seqflow().kv_batch_put(keys, partition_id, data, tags))


def kv_batch_get(keys, partition_id: str, select_fields=None):
    """TransferQueue raises ValueError for a key the partition lacks."""
    try:
        return sorted_fields(get_client().seqflow.kv_batch_get(_keys_list(keys), partition_id, select_fields,
                                                               layout=LAYOUT))
    except KeyError as error:
        raise ValueError(f"not found: {error.args[0] if error.args else error}") from error


def kv_batch_get_by_meta(meta: KVBatchMeta, select_fields=None):
    if select_fields is not None:
        requested = [select_fields] if isinstance(select_fields, str) else list(select_fields)
        unknown = [f for f in requested if meta.fields is not None and f not in meta.fields]
        if unknown:
            raise ValueError(f"select_fields {unknown} not found in the KVBatchMeta's fields {meta.fields}")
    return kv_batch_get(meta.keys, meta.partition_id, meta.fields if select_fields is None else select_fields)


def kv_list(partition_id: Optional[str] = None) -> dict:
    return _seqflow().kv_list(partition_id)


def kv_clear(keys, partition_id: str) -> None:
    _seqflow().kv_clear(_keys_list(keys), partition_id)


# ---- checkpoints ------------------------------------------------------------
def save_checkpoint(checkpoint_dir, *, include_storage: bool = True, metadata: Optional[dict] = None) -> None:
    """The whole system (controller, sampler state, storage) into
    checkpoint_dir, replaced atomically, with the user's `metadata`.
    include_storage=False is ignored, as TransferQueue ignores it for its
    in-memory storage (skipping the data would lose it)."""
    _seqflow().save_checkpoint(checkpoint_dir, metadata=metadata)


def load_checkpoint(checkpoint_dir) -> None:
    """Restores the system from checkpoint_dir; FileNotFoundError when it
    does not exist."""
    _seqflow().load_checkpoint(checkpoint_dir)


# ---- the client's data calls at module level ---------------------------------------
_CLIENT_CALLS = ("put", "get_meta", "get_data", "set_custom_meta", "clear_partition", "clear_samples",
                 "reset_consumption", "get_consumption_status", "get_production_status",
                 "check_consumption_status", "check_production_status", "get_partition_list")


def _client_call(name: str):
    method = getattr(TransferQueueClient, name)

    @functools.wraps(method)
    def call(*args, **kwargs):
        return method(get_client(), *args, **kwargs)

    call.__qualname__ = name
    return call


for _name in _CLIENT_CALLS:
    globals()[_name] = _client_call(_name)


# ---- async twins ------------------------------------------------------------
_SYNC_CALLS = ("kv_put", "kv_batch_put", "kv_batch_get", "kv_batch_get_by_meta", "kv_list", "kv_clear",
               "save_checkpoint", "load_checkpoint", *_CLIENT_CALLS)
for _name in _SYNC_CALLS:
    globals()[f"async_{_name}"] = async_twin(globals()[_name])

__all__ = ["init", "close", "get_client", "get_metrics_endpoint", *_SYNC_CALLS, *(f"async_{n}" for n in _SYNC_CALLS)]
