"""The iterators behind Client.watch and Client.awatch: each step is one
engine call that waits at the controller (a condition variable embedded, a
waiter holding no thread remote) until a change comes, so an idle watch
costs one call per slice, never a pass over the partition's keys."""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Iterator, Optional, Protocol

from seqflow._checks import check_count, check_name, check_seconds
from seqflow._seqflow import client as _native_client
from seqflow._seqflow import limits


class WatchedClient(Protocol):
    """What a watch needs of a seqflow.Client (named so, not imported: the client imports this module)."""

    _native: Any

    def _connected(self) -> Any: ...


# The longest one engine call waits: a closed client ends its iterators
# within this, and an iterator's timeout is checked at least this often.
_SLICE = 1.0


class Watch:
    """One watch's arguments and cursor; started (its cursor taken) when
    made, so that no change after Client.watch() returns is missed."""

    def __init__(self, client: WatchedClient, partition_id: str, key_prefix: Optional[str], tag_field: Optional[str],
                 timeout: Optional[float], max_changes: int) -> None:
        self._client = client
        self._partition = check_name(partition_id, "partition_id")
        self._prefix = "" if key_prefix is None else check_name(key_prefix, "key_prefix")
        self._field = "" if tag_field is None else check_name(tag_field, "tag_field")
        self._timeout = None if timeout is None else check_seconds(timeout, "timeout", allow_zero=True)
        self._max_changes = check_count(max_changes, "max_changes", minimum=1, maximum=limits.MAX_WATCH_CHANGES)
        self._cursor = self._call(client._connected(), 0, 0.0).cursor
        self._deadline = None if self._timeout is None else time.monotonic() + self._timeout

    def _call(self, native: object, cursor: int, wait: float) -> _native_client.WatchBatch:
        return native.watch(self._partition, self._prefix, self._field, cursor,  # type: ignore[attr-defined]
                            self._max_changes, round(wait * 1000))

    def next_changes(self, longest: float = _SLICE) -> Optional[list[_native_client.Change]]:
        """The changes since the last call, waiting at most `longest` seconds
        (and never past the timeout) for one; [] when none came; None when
        the watch is over (the client closed, or the timeout passed without
        a change)."""
        native = self._client._native
        if native is None:
            return None
        wait = min(_SLICE, longest)
        if self._deadline is not None:
            wait = min(wait, self._deadline - time.monotonic())
            if wait <= 0:
                return None
        try:
            batch = self._call(native, self._cursor, wait)
        except RuntimeError:
            if self._client._native is None:  # closed during the call
                return None
            raise
        self._cursor = batch.cursor
        if batch.changes and self._timeout is not None:
            self._deadline = time.monotonic() + self._timeout
        return list(batch.changes)


def changes(watch: Watch) -> Iterator[_native_client.Change]:
    while (batch := watch.next_changes()) is not None:
        yield from batch


async def async_changes(watch: Watch) -> AsyncIterator[_native_client.Change]:
    while (batch := await asyncio.to_thread(watch.next_changes)) is not None:
        for change in batch:
            yield change
