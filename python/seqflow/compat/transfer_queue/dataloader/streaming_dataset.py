"""``transfer_queue.dataloader.streaming_dataset``: seqflow's StreamingDataset
reading through this process's TransferQueue client (joined on first use,
in DataLoader worker processes too), and TransferQueue's helper names."""

from __future__ import annotations

from seqflow import streaming
from seqflow.streaming import split_batch


class StreamingDataset(streaming.StreamingDataset):
    """TransferQueue's StreamingDataset(config, batch_size, micro_batch_size,
    data_fields, partition_id, task_name, dp_rank, ...). `config` is kept for
    TransferQueue's signature; the data comes from the running system, in TransferQueue's containers."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("data_layout", "transfer_queue")
        super().__init__(*args, **kwargs)

    def _get_client(self):
        if self._client is None:
            from seqflow.compat.transfer_queue import interface

            interface.init(self.config)
            self._client = interface.get_client()
        return self._client

    def _status_client(self, client):
        return client.seqflow

    def __getstate__(self):
        state = super().__getstate__()
        state["_client"] = None  # a worker process joins the system itself
        return state


def default_fetch_batch_fn(tq_client, data_fields, batch_size, partition_id, task_name, sampling_config,
                           batch_index):
    return streaming.default_fetch_batch_fn(tq_client, data_fields, batch_size, partition_id, task_name,
                                            sampling_config, batch_index)


chunk_batch_fn = split_batch

__all__ = ["StreamingDataset", "chunk_batch_fn", "default_fetch_batch_fn"]
