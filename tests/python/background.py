"""Work a test runs in another thread, whose failure fails the test: start
it with Background(fn, ...), and end the test's use of it with
finish(timeout), which waits at most `timeout` seconds, fails when the thread
has not ended by then, and re-raises what the thread raised (or returns what
it returned)."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable


class Background:
    """fn(*args, **kwargs) in a daemon thread, after `delay` seconds."""

    def __init__(self, fn: Callable[..., Any], *args: Any, delay: float = 0.0, name: str = "", **kwargs: Any):
        self.name = name or getattr(fn, "__name__", "background work")
        self._cancelled = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None

        def run() -> None:
            if delay and self._cancelled.wait(delay):
                return
            try:
                self._value = fn(*args, **kwargs)
            except BaseException as error:  # noqa: BLE001 - re-raised by finish()
                self._error = error

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()

    def done(self) -> bool:
        return not self._thread.is_alive()

    def cancel(self) -> None:
        """Before the delay has passed: fn never runs."""
        self._cancelled.set()

    def finish(self, timeout: float) -> Any:
        """fn's result; raises what fn raised, or AssertionError when the
        thread is still running after `timeout` seconds."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError(f"{self.name} did not finish within {timeout} s")
        if self._error is not None:
            raise self._error
        return self._value


def finish_all(works: list[Background], timeout: float) -> list[Any]:
    """finish() of each within one shared deadline: their results in order;
    raises the first failure (after waiting for every thread)."""
    deadline = time.monotonic() + timeout
    for work in works:
        work._thread.join(max(0.0, deadline - time.monotonic()))
    return [work.finish(0) for work in works]
