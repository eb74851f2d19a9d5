"""``async_<name>`` twins of blocking calls, as TransferQueue offers them."""

from __future__ import annotations

import asyncio
import functools


def async_twin(function):
    """`function` (a function or a method) run in a worker thread, awaitable:
    seqflow releases the GIL while it waits, so the event loop keeps going."""

    @functools.wraps(function)
    async def twin(*args, **kwargs):
        return await asyncio.to_thread(function, *args, **kwargs)

    twin.__name__ = twin.__qualname__ = f"async_{function.__name__}"
    twin.__doc__ = f"{function.__name__} in a worker thread, for asyncio.\n\n{function.__doc__ or ''}"
    return twin
