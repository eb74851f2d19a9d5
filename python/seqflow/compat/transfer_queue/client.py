"""TransferQueue's client classes over a seqflow client.

``TransferQueueClient`` has TransferQueue 0.1.11's synchronous methods and
their ``async_`` twins; ``AsyncTransferQueueClient`` is the same class (the
async methods are what its users await). Each call is one call of seqflow's
client; where TransferQueue's results differ in type or error (status
tensors, a missing key's ValueError, an absent partition) this layer gives
TransferQueue's.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional

from seqflow._async import async_twin
from seqflow.batch_meta import BatchMeta
from seqflow.compat.transfer_queue.sampler import numpy_arguments


def _as_torch_status(indexes, flags):
    """TransferQueue's status types: torch int64 indexes and int8 flags;
    (None, None) for a partition that does not exist."""
    import torch

    if indexes is None:
        return None, None
    return torch.as_tensor(indexes, dtype=torch.int64), torch.as_tensor(flags).to(torch.int8)


def _keys_list(keys, name: str = "keys") -> list[str]:
    if isinstance(keys, str):
        return [keys]
    if not isinstance(keys, list):
        raise TypeError(f"Only string or list of strings are allowed as `{name}`, got {type(keys).__name__}")
    if not keys:
        raise ValueError(f"Received an empty list as `{name}`.")
    if not all(isinstance(k, str) for k in keys):
        raise TypeError(f"Not all elements in `{name}` are strings.")
    return keys


def _parsed(data, data_parser: Optional[Callable]):
    """TransferQueue's data_parser: it rewrites the batch's columns in place
    (a plain dict of field -> batched values) before they are stored."""
    if data_parser is None:
        return data
    columns = {}
    for name in data.keys():
        value = data[name]
        if getattr(value, "is_nested", False):
            value = list(value.unbind())
        elif not hasattr(value, "shape") and type(value) is not list and not isinstance(value, (str, bytes)):
            value = list(value)  # a non-tensor column (a TensorDict hands its NonTensorStack as a list-like)
        columns[name] = value
    data_parser(columns)
    return columns


class RequestRefused(RuntimeError, ValueError):
    """A request the controller refused. TransferQueue's client raises
    RuntimeError for every such answer, seqflow ValueError naming the
    parameter: this is both, so either except clause catches it."""


def _controller_call(method):
    @functools.wraps(method)
    def call(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except RequestRefused:
            raise
        except (ValueError, KeyError) as error:
            raise RequestRefused(str(error.args[0]) if error.args else str(error)) from error

    return call


LAYOUT = "transfer_queue"  # get_data returns TransferQueue's containers (nested tensors, NonTensorStack)


def sorted_fields(data):
    """TransferQueue returns a TensorDict's fields in name order."""
    if type(data).__name__ != "TensorDict" or list(data.keys()) == sorted(data.keys()):
        return data
    return data.select(*sorted(data.keys()))


class TransferQueueClient:
    """TransferQueue's client API on one seqflow client (``self.seqflow``)."""

    def __init__(self, client_id: str = "", controller_info: Any = None, *, seqflow_client=None, **_ignored):
        if seqflow_client is None:
            from seqflow.client import Client

            address = getattr(controller_info, "address", controller_info)
            if not isinstance(address, str):
                raise TypeError("controller_info must be a seqflow controller address (tcp://HOST:PORT), got "
                                f"{controller_info!r}; or call transfer_queue.init() and get_client()")
            seqflow_client = Client.remote(address)
        seqflow_client.allow_pickle = True  # TransferQueue stores any Python object; its users rely on that
        self.client_id = client_id
        self.seqflow = seqflow_client

    def initialize_storage_manager(self, manager_type: str = "SimpleStorage", config: Any = None) -> None:
        """seqflow's client finds the storage units through the controller."""

    # ---- data -----------------------------------------------------------------
    @_controller_call
    def get_meta(self, data_fields, batch_size: int, partition_id: str, mode: str = "fetch",
                 task_name: Optional[str] = None, sampling_config: Optional[dict] = None, **kwargs) -> BatchMeta:
        if batch_size == 0 and not isinstance(batch_size, bool):
            return BatchMeta.empty()  # TransferQueue's answer; seqflow's own get_meta refuses a batch of 0
        return self.seqflow.get_meta(data_fields, batch_size, partition_id, mode, task_name,
                                     numpy_arguments.encoded(sampling_config), **kwargs)

    @_controller_call
    def set_custom_meta(self, metadata: BatchMeta) -> None:
        self.seqflow.set_custom_meta(metadata)

    def put(self, data, metadata: Optional[BatchMeta] = None, partition_id: Optional[str] = None,
            data_parser: Optional[Callable] = None) -> BatchMeta:
        return self.seqflow.put(_parsed(data, data_parser), metadata=metadata, partition_id=partition_id)

    def get_data(self, metadata: BatchMeta, **kwargs):
        """TransferQueue's containers (see seqflow's get_data, layout
        "transfer_queue"); a copy the caller owns."""
        kwargs.setdefault("layout", LAYOUT)
        return sorted_fields(self.seqflow.get_data(metadata, **kwargs))

    @_controller_call
    def clear_partition(self, partition_id: str) -> None:
        self.seqflow.clear_partition(partition_id)

    @_controller_call
    def clear_samples(self, metadata: BatchMeta) -> None:
        self.seqflow.clear_samples(metadata)

    # ---- status -----------------------------------------------------------------
    @_controller_call
    def get_consumption_status(self, task_name: str, partition_id: str):
        """(global indexes, 1 where consumed) as torch tensors; (None, None)
        for a partition that does not exist."""
        return _as_torch_status(*self.seqflow.get_consumption_status(task_name, partition_id))

    @_controller_call
    def get_production_status(self, data_fields, partition_id: str):
        """(global indexes, int8 flags of shape (samples, fields))."""
        return _as_torch_status(*self.seqflow.get_production_status(data_fields, partition_id, per_field=True))

    @_controller_call
    def check_consumption_status(self, task_name: str, partition_id: str) -> bool:
        return bool(self.seqflow.check_consumption_status(task_name, partition_id))

    @_controller_call
    def check_production_status(self, data_fields, partition_id: str) -> bool:
        return bool(self.seqflow.check_production_status(data_fields, partition_id))

    @_controller_call
    def reset_consumption(self, partition_id: str, task_name: Optional[str] = None) -> bool:
        self.seqflow.reset_consumption(partition_id, task_name)
        return True

    @_controller_call
    def get_partition_list(self) -> list[str]:
        return list(self.seqflow.get_partition_list())

    # ---- key-value ------------------------------------------------------------
    def kv_retrieve_meta(self, keys, partition_id: str, create: bool = False) -> BatchMeta:
        """The samples of `keys`; create=True registers missing keys (no
        fields yet), create=False leaves them out, as TransferQueue does."""
        meta = self.seqflow.kv_meta(_keys_list(keys), partition_id, create=create, missing="skip")
        if meta.size == 0:
            return BatchMeta.empty()
        return meta.select_fields(meta._produced_fields())  # TransferQueue names the fields all keys hold

    def kv_retrieve_keys(self, global_indexes, partition_id: str) -> list[str]:
        if isinstance(global_indexes, int) and not isinstance(global_indexes, bool):
            global_indexes = [global_indexes]
        elif isinstance(global_indexes, list):
            if not global_indexes:
                raise ValueError("Received an empty list as `global_indexes`.")
            if not all(isinstance(i, int) and not isinstance(i, bool) for i in global_indexes):
                raise TypeError("Not all elements in `global_indexes` are int.")
        else:
            raise TypeError("Only int or list of int are allowed as `global_indexes`.")
        try:
            return self.seqflow.kv_keys(global_indexes, partition_id)
        except KeyError as error:
            raise RuntimeError(f"Some global_indexes of {global_indexes} have no corresponding keys in partition "
                               f"{partition_id!r}: {error.args[0] if error.args else error}") from None

    @_controller_call
    def kv_list(self, partition_id: Optional[str] = None) -> dict[str, dict[str, Any]]:
        return self.seqflow.kv_list(partition_id)

    # ---- lifetime ---------------------------------------------------------------
    def close(self) -> None:
        self.seqflow.close()

    def __repr__(self) -> str:
        return f"TransferQueueClient(client_id={self.client_id!r}, seqflow={self.seqflow!r})"


_ASYNC_TWINS = ("get_meta", "set_custom_meta", "put", "get_data", "clear_partition", "clear_samples",
                "get_consumption_status", "get_production_status", "check_consumption_status",
                "check_production_status", "reset_consumption", "get_partition_list", "kv_retrieve_meta",
                "kv_retrieve_keys", "kv_list")


for _name in _ASYNC_TWINS:
    setattr(TransferQueueClient, f"async_{_name}", async_twin(getattr(TransferQueueClient, _name)))

AsyncTransferQueueClient = TransferQueueClient

__all__ = ["AsyncTransferQueueClient", "RequestRefused", "TransferQueueClient"]
