"""``transfer_queue.utils``: TransferQueue's internals (ZeroMQ sockets,
serialisation, storage clients) have no seqflow counterpart; see the
difference table in docs/switching.md."""
