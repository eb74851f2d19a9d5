"""TransferQueue 0.1.11 as a reference peer for tests and benchmarks.

Two ways in, neither of which puts TransferQueue's code into seqflow:

- load(): TransferQueue's karmarkar_karp and get_seqlen_balanced_partitions,
  read from PyPI's `transferqueue` wheel (downloaded once into a cache),
  extracted with `ast` and executed on their own; the package is never
  imported.
- transferqueue_python(): the python of a separate virtual environment holding
  the real TransferQueue (plus torch and pytest), made on first use, for code
  that must run TransferQueue itself (differential tests, its own test suite,
  benchmarks) without touching seqflow's environment.

Both live under $SEQFLOW_REFERENCE_CACHE (default ~/.cache/seqflow-reference).
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

VERSION = "0.1.11"
SOURCE_PATH = "transfer_queue/sampler/seqlen_balanced_sampler.py"
FUNCTIONS = ("karmarkar_karp", "get_seqlen_balanced_partitions")
CACHE_DIR = os.environ.get(
    "SEQFLOW_REFERENCE_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "seqflow-reference")
)
VENV_DIR = os.path.join(CACHE_DIR, "tq-venv")
# torch pinned: an unpinned pip fetches a multi-GB CUDA build. pytest and its
# plugins run TransferQueue's own tests.
VENV_PACKAGES = (f"transferqueue=={VERSION}", "torch==2.13.0", "pytest", "pytest-asyncio", "pytest-mock")
# Written last, holding VENV_PACKAGES: a venv without it (or with another list) is half made.
VENV_COMPLETE_MARKER = "seqflow-complete"
VENV_CHECK = (
    "import importlib.metadata as m, sys\n"
    f"sys.exit(0 if m.version('transferqueue') == '{VERSION}' else 3)\n"
    "import transfer_queue, torch, pytest, pytest_asyncio, pytest_mock\n"
)
DOWNLOAD_TIMEOUT = 300
INSTALL_TIMEOUT = 1200  # torch's CPU wheel and Ray, on a slow mirror


class ReferenceUnavailable(RuntimeError):
    pass


def wheel_path() -> str:
    """The transferqueue 0.1.11 wheel in the cache, downloaded first if needed."""
    pattern = os.path.join(CACHE_DIR, f"transferqueue-{VERSION}-*.whl")
    wheels = sorted(glob.glob(pattern))
    if wheels:
        return wheels[-1]
    with _cache_lock("download"):  # another process may be downloading: wait for it
        wheels = sorted(glob.glob(pattern))
        if wheels:
            return wheels[-1]
        # Downloaded beside the cache and moved in whole: a reader that globs
        # without the lock never opens a half-written wheel.
        with tempfile.TemporaryDirectory(dir=CACHE_DIR) as staging:
            done = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                 "-d", staging, f"transferqueue=={VERSION}"],
                capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT,
            )
            for wheel in glob.glob(os.path.join(staging, f"transferqueue-{VERSION}-*.whl")):
                os.replace(wheel, os.path.join(CACHE_DIR, os.path.basename(wheel)))
    wheels = sorted(glob.glob(pattern))
    if done.returncode != 0 or not wheels:
        raise ReferenceUnavailable(f"pip download transferqueue=={VERSION} failed: {done.stderr.strip()[-400:]}")
    return wheels[-1]


def load() -> dict:
    """Returns {"karmarkar_karp": fn, "get_seqlen_balanced_partitions": fn,
    "version": wheel file name}; raises ReferenceUnavailable."""
    wheel = wheel_path()
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


def transferqueue_python() -> str:
    """The python of the reference venv holding the real TransferQueue 0.1.11,
    torch 2.13.0 and pytest (+ pytest-asyncio, pytest-mock). Made on first use
    (a few minutes; log in the cache dir), completed when half made (an
    interrupted install), and safe to call from several processes at once.
    Raises ReferenceUnavailable when it cannot be installed."""
    python = os.path.join(VENV_DIR, "bin", "python")
    if _venv_marked_complete():
        return python
    with _cache_lock("tq-venv"):  # another process may be installing: wait for it
        if not _venv_marked_complete():
            _make_venv(python)
    return python


@contextlib.contextmanager
def _cache_lock(name: str):
    """An exclusive lock on CACHE_DIR/<name>.lock, held across processes until the block ends."""
    os.makedirs(CACHE_DIR, exist_ok=True)
    with open(os.path.join(CACHE_DIR, f"{name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _venv_marked_complete() -> bool:
    try:
        with open(os.path.join(VENV_DIR, VENV_COMPLETE_MARKER)) as marker:
            return marker.read().split() == list(VENV_PACKAGES)
    except OSError:
        return False


def _make_venv(python: str) -> None:
    log_path = os.path.join(CACHE_DIR, "tq-install.log")
    print(f"reference_peer: installing TransferQueue {VERSION} into {VENV_DIR} "
          f"(once, a few minutes; log {log_path})", file=sys.stderr, flush=True)
    steps = []
    if not _runs(python, "import sys"):  # missing or broken interpreter: start over
        shutil.rmtree(VENV_DIR, ignore_errors=True)
        steps.append([sys.executable, "-m", "venv", VENV_DIR])
    # pip completes a venv whose earlier install was interrupted and is quick on a complete one.
    steps.append([python, "-m", "pip", "install", *VENV_PACKAGES])
    try:
        with open(log_path, "w") as log:
            for step in steps:
                done = subprocess.run(step, stdout=log, stderr=subprocess.STDOUT, timeout=INSTALL_TIMEOUT)
                if done.returncode != 0:
                    raise ReferenceUnavailable(
                        f"`{' '.join(step)}` exited {done.returncode}: {_last_line(log_path)}")
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ReferenceUnavailable(f"installing TransferQueue {VERSION} into {VENV_DIR} failed: {error}") from None
    if not _runs(python, VENV_CHECK):
        raise ReferenceUnavailable(f"{VENV_DIR} lacks transferqueue=={VERSION} or its test tools after install")
    with open(os.path.join(VENV_DIR, VENV_COMPLETE_MARKER), "w") as marker:
        marker.write("\n".join(VENV_PACKAGES) + "\n")


def _runs(python: str, code: str) -> bool:
    try:
        return subprocess.run([python, "-c", code], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _last_line(path: str) -> str:
    with open(path, errors="replace") as log:
        lines = [line.strip() for line in log if line.strip()]
    return lines[-1] if lines else "(no output)"
