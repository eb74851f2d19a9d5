"""``transfer_queue.dataloader``."""

from seqflow.compat.transfer_queue.dataloader.streaming_dataloader import StreamingDataLoader
from seqflow.compat.transfer_queue.dataloader.streaming_dataset import StreamingDataset

__all__ = ["StreamingDataset", "StreamingDataLoader"]
