"""Shared fixtures of the balancing tests: the TransferQueue 0.1.11 reference
peer (tools/reference_peer.py; a test that needs it fails, never skips, when it
cannot be had or is another version), and a fixed-seed random generator."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

# Services the tests start (in this process, as `seqflow serve` processes or
# Ray actors, all inheriting this) save checkpoints where the tests ask:
# under the system's temporary directory, instead of their default root
# (~/.local/state/seqflow/checkpoints), which would refuse those paths.
os.environ.setdefault("SEQFLOW_CHECKPOINT_ROOT", tempfile.gettempdir())
TOOLS_DIR = REPO_ROOT / "tools"


def _load_reference():
    """The reference functions, or the reason they cannot be had."""
    if str(TOOLS_DIR) not in sys.path:
        sys.path.insert(0, str(TOOLS_DIR))
    import reference_peer

    try:
        functions = reference_peer.load()
    except (reference_peer.ReferenceUnavailable, subprocess.TimeoutExpired) as error:
        return None, (f"TransferQueue {reference_peer.VERSION}, the reference (tools/reference_peer.py), "
                      f"cannot be had: {error}")
    if not functions["version"].startswith(f"transferqueue-{reference_peer.VERSION}-"):
        return None, f"the reference is {functions['version']}, not the pinned transferqueue {reference_peer.VERSION}"
    return functions, None


@pytest.fixture(scope="session")
def reference():
    """{"karmarkar_karp": fn, "get_seqlen_balanced_partitions": fn, "version": str},
    loaded once by tools/reference_peer.py; fails the test when the pinned
    TransferQueue 0.1.11 cannot be had."""
    if not _REFERENCE:
        _REFERENCE.append(_load_reference())  # a failed load is not retried per test
    functions, reason = _REFERENCE[0]
    if functions is None:
        pytest.fail(reason, pytrace=False)
    return functions


_REFERENCE: list = []


@pytest.fixture
def rng():
    """A fresh generator with a fixed seed: failures reproduce exactly."""
    return np.random.default_rng(20260509)
