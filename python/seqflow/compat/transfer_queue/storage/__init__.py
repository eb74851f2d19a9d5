"""``transfer_queue.storage``: the names programs catch. seqflow's storage
units replace TransferQueue's storage backends (see _system)."""


class StorageKeyNotFoundError(KeyError):
    """A key the storage does not hold."""


__all__ = ["StorageKeyNotFoundError"]
