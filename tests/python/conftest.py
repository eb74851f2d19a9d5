"""Shared fixtures of the balancing tests: the verl / TransferQueue reference
peer, and a fixed-seed random generator."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
TOOLS_DIR = REPO_ROOT / "tools"


def _load_reference():
    """The reference functions, or the reason they cannot be had."""
    if str(TOOLS_DIR) not in sys.path:
        sys.path.insert(0, str(TOOLS_DIR))
    import reference_peer

    try:
        return reference_peer.load(), None
    except (reference_peer.ReferenceUnavailable, subprocess.TimeoutExpired) as error:
        return None, f"verl reference (tools/reference_peer.py) unavailable: {error}"


@pytest.fixture(scope="session")
def reference():
    """{"karmarkar_karp": fn, "get_seqlen_balanced_partitions": fn, "version": str},
    loaded once by tools/reference_peer.py; skips the test when it cannot be had."""
    if not _REFERENCE:
        _REFERENCE.append(_load_reference())  # a failed load is not retried per test
    functions, reason = _REFERENCE[0]
    if functions is None:
        pytest.skip(reason)
    return functions


_REFERENCE: list = []


@pytest.fixture
def rng():
    """A fresh generator with a fixed seed: failures reproduce exactly."""
    return np.random.default_rng(20260509)
