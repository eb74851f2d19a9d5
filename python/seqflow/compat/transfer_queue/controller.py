"""``transfer_queue.controller``: the name of the actor that joining
processes ask for the config (``ray.get_actor("TransferQueueController",
namespace="transfer_queue").get_config.remote()``)."""

from seqflow.compat.transfer_queue._system import ACTOR_NAME, ACTOR_NAMESPACE
from seqflow.compat.transfer_queue._system import _ConfigActor as TransferQueueController

__all__ = ["TransferQueueController", "ACTOR_NAME", "ACTOR_NAMESPACE"]
