"""Loads TransferQueue's karmarkar_karp and get_seqlen_balanced_partitions as a
reference peer for tests and benchmarks.

The functions are read from PyPI's `transferqueue` wheel at run time (downloaded
once into a cache), extracted with `ast` and executed on their own: the package
is never imported and its code is never part of seqflow.
"""

from __future__ import annotations

import ast
import glob
import os
import subprocess
import sys
import zipfile

SOURCE_PATH = "transfer_queue/sampler/seqlen_balanced_sampler.py"
FUNCTIONS = ("karmarkar_karp", "get_seqlen_balanced_partitions")
CACHE_DIR = os.environ.get(
    "SEQFLOW_REFERENCE_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "seqflow-reference")
)


class ReferenceUnavailable(RuntimeError):
    pass


def _wheel_path() -> str:
    wheels = sorted(glob.glob(os.path.join(CACHE_DIR, "transferqueue-*.whl")))
    if wheels:
        return wheels[-1]
    os.makedirs(CACHE_DIR, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "-d", CACHE_DIR, "transferqueue"],
        capture_output=True, text=True, timeout=300,
    )
    wheels = sorted(glob.glob(os.path.join(CACHE_DIR, "transferqueue-*.whl")))
    if done.returncode != 0 or not wheels:
        raise ReferenceUnavailable(f"pip download transferqueue failed: {done.stderr.strip()[-400:]}")
    return wheels[-1]


def load() -> dict:
    """Returns {"karmarkar_karp": fn, "get_seqlen_balanced_partitions": fn,
    "version": wheel file name}; raises ReferenceUnavailable."""
    wheel = _wheel_path()
    with zipfile.ZipFile(wheel) as archive:
        source = archive.read(SOURCE_PATH).decode()
    tree = ast.parse(source)
    wanted = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in FUNCTIONS]
    if len(wanted) != len(FUNCTIONS):
        raise ReferenceUnavailable(f"{SOURCE_PATH} in {wheel} lacks {FUNCTIONS}")
    module = ast.Module(body=[ast.parse("import heapq").body[0], *wanted], type_ignores=[])
    namespace: dict = {}
    exec(compile(module, f"<reference {os.path.basename(wheel)}>", "exec"), namespace)
    return {name: namespace[name] for name in FUNCTIONS} | {"version": os.path.basename(wheel)}
