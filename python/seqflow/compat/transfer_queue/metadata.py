"""``transfer_queue.metadata``: seqflow's BatchMeta and KVBatchMeta, which
have TransferQueue's constructor, attributes and methods."""

from seqflow.batch_meta import BatchMeta, KVBatchMeta

__all__ = ["BatchMeta", "KVBatchMeta"]
