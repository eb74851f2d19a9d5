"""BatchMeta and KVBatchMeta, TransferQueue 0.1.11's metadata objects.

``BatchMeta`` is a C++ class (python/bindings/batch_meta_object.cc; see
``help(BatchMeta)``); ``chunk_sizes`` is the one split rule of data and
metadata.
"""

from seqflow import _seqflow
from seqflow.kv_batch_meta import KVBatchMeta

__all__ = ["BatchMeta", "KVBatchMeta", "chunk_sizes"]

BatchMeta = _seqflow.BatchMeta
chunk_sizes = _seqflow.chunk_sizes
