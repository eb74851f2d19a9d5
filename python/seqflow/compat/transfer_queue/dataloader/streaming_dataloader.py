"""``transfer_queue.dataloader.streaming_dataloader``: seqflow's StreamingDataLoader."""

from seqflow.streaming import StreamingDataLoader

__all__ = ["StreamingDataLoader"]
