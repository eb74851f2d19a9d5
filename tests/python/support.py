"""Helpers shared by the test modules: a free loopback port and a wait for a
condition that ends at a deadline."""

from __future__ import annotations

import socket
import time
from typing import Callable


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, poll: float = 0.05) -> None:
    """Polls predicate() until it holds; raises AssertionError naming `what`
    once `timeout` seconds have passed without it."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(poll)


def unit_of(global_index: int, units: int) -> int:
    """The storage unit of a sample in remote mode: global indexes are placed in blocks of
    limits.PLACEMENT_BLOCK consecutive ones, block b on unit b % units (units in endpoint order)."""
    from seqflow import _seqflow

    return global_index // _seqflow.limits.PLACEMENT_BLOCK % units
