"""seqflow under TransferQueue 0.1.11's names (``import transfer_queue``
after ``seqflow.compat.install_as_transfer_queue()``)."""

from seqflow.batch_meta import BatchMeta, KVBatchMeta
from seqflow.client import StaleSampleError
from seqflow.compat.transfer_queue.client import AsyncTransferQueueClient, TransferQueueClient
from seqflow.compat.transfer_queue.dataloader import StreamingDataLoader, StreamingDataset
from seqflow.compat.transfer_queue.interface import *  # noqa: F401,F403
from seqflow.compat.transfer_queue.interface import __all__ as _interface_names
from seqflow.compat.transfer_queue.sampler import (
    BaseSampler,
    GRPOGroupNSampler,
    RankAwareSampler,
    SeqlenBalancedSampler,
    SequentialSampler,
)
from seqflow.compat.transfer_queue.storage import StorageKeyNotFoundError

__version__ = "0.1.11"

__all__ = [
    *_interface_names,
    "KVBatchMeta", "BatchMeta", "StaleSampleError", "TransferQueueClient", "AsyncTransferQueueClient", "StorageKeyNotFoundError",
    "StreamingDataset", "StreamingDataLoader",
    "BaseSampler", "GRPOGroupNSampler", "SequentialSampler", "RankAwareSampler", "SeqlenBalancedSampler",
]
