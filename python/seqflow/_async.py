"""``async_<name>`` twins of blocking calls, as TransferQueue offers them."""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any, Callable, Coroutine

if TYPE_CHECKING:  # typing_extensions: ParamSpec is in typing from Python 3.10 only
    from typing import TypeVar

    from typing_extensions import ParamSpec

    _Params = ParamSpec("_Params")
    _Result = TypeVar("_Result")


def async_twin(function: Callable[_Params, _Result]) -> Callable[_Params, Coroutine[Any, Any, _Result]]:
    """`function` (a function or a method) run in a worker thread, awaitable:
    seqflow releases the GIL while it waits, so the event loop keeps going."""

    @functools.wraps(function)
    async def twin(*args: _Params.args, **kwargs: _Params.kwargs) -> _Result:
        return await asyncio.to_thread(function, *args, **kwargs)

    twin.__name__ = twin.__qualname__ = f"async_{function.__name__}"
    twin.__doc__ = f"{function.__name__} in a worker thread, for asyncio.\n\n{function.__doc__ or ''}"
    return twin
