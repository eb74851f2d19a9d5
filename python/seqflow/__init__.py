"""seqflow: balanced data flow for LLM reinforcement-learning post-training.

The streaming API follows TransferQueue's names and meanings:
``seqflow.init(config)``, ``seqflow.put``, ``seqflow.get_meta``,
``seqflow.get_data``, the kv_* calls, checkpoints, each also as
``async_<name>``; ``BatchMeta``; the samplers; ``StreamingDataset`` and
``StreamingDataLoader`` (these two need torch).
"""

from seqflow import balance
from seqflow import pack
from seqflow.batch_meta import BatchMeta, KVBatchMeta
from seqflow.client import *  # noqa: F401,F403  (init, get_client, close, put, get_meta, ...)
from seqflow.client import API_FUNCTIONS as _API_FUNCTIONS
from seqflow.client import Client
from seqflow.samplers import (
    BaseSampler,
    GRPOGroupNSampler,
    RankAwareSampler,
    SeqlenBalancedSampler,
    SequentialSampler,
    TokenBudgetSampler,
)
from seqflow.streaming import StreamingDataLoader, StreamingDataset

__version__ = "0.1.0"
__all__ = [
    "balance",
    "pack",
    "__version__",
    "BatchMeta",
    "KVBatchMeta",
    "Client",
    "init",
    "get_client",
    "close",
    "BaseSampler",
    "SequentialSampler",
    "GRPOGroupNSampler",
    "RankAwareSampler",
    "SeqlenBalancedSampler",
    "TokenBudgetSampler",
    "StreamingDataset",
    "StreamingDataLoader",
    *_API_FUNCTIONS,
]
