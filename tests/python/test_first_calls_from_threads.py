"""The bindings look Python objects up on first use (seqflow._convert's
functions, numpy's types, ...). A C++ function-local static around such a
lookup deadlocked: its import let another thread take the GIL, which then
waited on the static's guard while holding it (the demo's rank threads hung
on their first fetch). Eight threads make their first calls at once, in a
fresh interpreter that compiles every module it imports and switches threads
as often as CPython allows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).with_name("first_calls_from_threads.py")


def test_first_calls_from_eight_threads_at_once_do_not_deadlock(tmp_path):
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(tmp_path / "pycache"))
    done = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "errors []" in done.stdout
