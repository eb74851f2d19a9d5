"""``transfer_queue.controller``: the Ray actor named
``TransferQueueController`` (namespace ``transfer_queue``).

With TransferQueue, programs reach the controller actor by name: joining
processes ask it for the config, and tests and tools call its partition
methods (``list_partitions``, ``clear_partition``, ``reset_consumption``,
the status calls). seqflow's controller is a C++ service; this actor holds
the config and answers those methods through a seqflow client of the
service. ``TransferQueueController`` is the Ray actor class (as
TransferQueue's is); ``ControllerActor`` the plain class behind it.
"""

from __future__ import annotations

import functools
from typing import Any, Optional

from seqflow._config import config_get

ACTOR_NAME = "TransferQueueController"
ACTOR_NAMESPACE = "transfer_queue"


class ControllerActor:
    """conf: the running system's config; its controller.address names the
    seqflow controller service."""

    def __init__(self, conf: Any = None):
        self._conf = conf
        self._client = None

    # ---- config ---------------------------------------------------------------
    def get_config(self):
        return self._conf

    def store_config(self, conf) -> None:
        self._conf = conf
        self._client = None

    def _seqflow(self):
        if self._client is None:
            from seqflow.client import Client

            address = config_get(self._conf, "controller.address", None)
            if address is None:
                raise RuntimeError("TransferQueueController has no seqflow controller address yet; "
                                   "transfer_queue.init() stores it")
            self._client = Client.remote(address)
        return self._client

    # ---- TransferQueue's controller methods -----------------------------------------
    def list_partitions(self) -> list[str]:
        return list(self._seqflow().get_partition_list())

    def clear_partition(self, partition_id: str, clear_consumption: bool = True) -> None:
        """The partition's samples and data; a partition that does not exist
        is left alone (clear_consumption: seqflow forgets a cleared
        partition's consumption either way)."""
        self._seqflow().clear_partition(partition_id)

    def reset_consumption(self, partition_id: str, task_name: Optional[str] = None) -> None:
        self._seqflow().reset_consumption(partition_id, task_name)

    def get_consumption_status(self, partition_id: str, task_name: str):
        from seqflow.compat.transfer_queue.client import _as_torch_status

        return _as_torch_status(*self._seqflow().get_consumption_status(task_name, partition_id))

    def get_production_status(self, partition_id: str, data_fields: list[str]):
        from seqflow.compat.transfer_queue.client import _as_torch_status

        return _as_torch_status(*self._seqflow().get_production_status(data_fields, partition_id, per_field=True))


@functools.lru_cache(maxsize=None)
def _ray_actor_class():
    import ray

    return ray.remote(ControllerActor)


def __getattr__(name: str):
    if name == "TransferQueueController":  # the Ray actor class, made when first asked for (imports ray)
        return _ray_actor_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ACTOR_NAME", "ACTOR_NAMESPACE", "ControllerActor", "TransferQueueController"]
