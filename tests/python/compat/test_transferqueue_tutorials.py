"""TransferQueue 0.1.11's own tutorials and recipes run unmodified on seqflow.

The 8 scripts of PyPI's transferqueue 0.1.11 wheel (tutorial/01..06 and
recipe/simple_use_case/*; the git repository's notebook and other scripts
are not in the wheel) are extracted at test time (tools/reference_peer.py
downloads the wheel once and caches it) and each runs as a subprocess after
the one-line switch (run_as_transfer_queue.py), with a deadline. Each must
exit 0, and its output must be the same script's output on the real
TransferQueue (run once per wheel in the reference venv and cached) after
normalisation:

- everything: ANSI colours; Ray's worker prefix `(name pid=N, ip=A)` becomes
  `(name)` (a bare prefix, Ray's flush of a worker's line in two pieces, goes), and worker lines are compared as a sorted list apart from the
  driver's, which stay in order (the interleaving is scheduling); logging
  timestamps; Ray's messages about itself (`(raylet) ...`); the keys of
  flat dicts sorted (seqflow returns metadata dicts, tags and custom_meta,
  with sorted keys: docs/switching.md).
- per script, where TransferQueue itself differs from run to run (random
  data, unseeded samplers, timing), listed in SCRIPTS with the reason.

The output compared is stdout plus the lines the scripts' own loggers write
to stderr (relax_demo logs its progress there); Ray's and TransferQueue's or
seqflow's own log lines are not compared.
"""

from __future__ import annotations

import ast
import concurrent.futures
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "tools"))
import reference_peer  # noqa: E402  (tools/ is no package)

LAUNCHER = HERE / "run_as_transfer_queue.py"
SCRIPT_TIMEOUT = 240.0  # one script on seqflow; the slowest sleeps ~35 s by design, Ray starts take ~10 s
REFERENCE_SCRIPT_TIMEOUT = 400.0  # on TransferQueue, once per wheel: its Ray actors start slowly on a busy machine
PARALLEL_SCRIPTS = 2  # each script starts its own Ray instance; more would starve this 2-core machine
RAY_CPUS = 8  # the scripts' actors ask for CPUs (TransferQueue's and single_controller_demo's workers)
# Changes when the way the scripts are run changes: the cached reference outputs are then made anew.
RUN_SETTINGS = "v1"


@dataclass(frozen=True)
class Script:
    path: str  # in the wheel
    # (pattern, replacement, why): output TransferQueue itself varies from run to run
    varying: tuple[tuple[str, str, str], ...] = ()
    # (pattern, why): lines left out, for the same reason
    dropped: tuple[tuple[str, str], ...] = ()


SCRIPTS = [
    Script("tutorial/01_core_components.py"),
    Script("tutorial/02_kv_interface.py"),
    Script("tutorial/03_metadata_concepts.py", (
        (r"'(uid|session_id)': '[0-9a-f]{4}'", r"'\1': '<hex>'", "uuid4().hex[:4]"),)),
    Script("tutorial/04_understanding_controller.py"),
    Script("tutorial/05_custom_sampler.py", (
        (r"(Got samples.*: |All sampled: |Batch \d: )\[[\d, ]*\]", r"\1[N...]", "unseeded random samplers"),
        (r"(Priority of sampled: )\[.*\]", r"\1[...]", "unseeded random samplers"),
        (r"(high-priority indices: )\[.*\]", r"\1[...]", "unseeded random samplers"),)),
    Script("tutorial/06_streaming_dataloader.py", (
        (r"(retrieved samples: )\[[\d, ]*\]", r"\1[N...]", "which rank gets which samples is arrival order"),)),
    Script("recipe/simple_use_case/relax_demo.py", dropped=(
        (r" \| progress: ", "polled every 0.2 s: how often, and the counts seen, are timing"),)),
    Script("recipe/simple_use_case/single_controller_demo.py", (
        (r"offsets=tensor\(\[[\d, ]*\]\)", "offsets=tensor([...])", "random prompt and response lengths"),
        (r"\(size=\((\d+), j\d+\)", r"(size=(\1, j)", "torch numbers jagged dimensions per process"),)),
]

ANSI = re.compile(r"\x1b\[[0-9;]*m")
RAY_PREFIX = re.compile(r"^\((\w+) pid=\d+(?:, ip=[\d.]+)?\)(?: |$)")
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - ")
RAY_OWN = re.compile(r"^\((raylet|gcs_server|autoscaler\S*)\) ")  # Ray's messages about itself
OWN_LOGGER = re.compile(r" - \w+ - (MAIN|__main__) - ")  # the scripts' get_logger("MAIN") / get_logger(__name__)
FLAT_DICT = re.compile(r"\{[^{}]*\}")


def _sorted_dict(match: re.Match) -> str:
    try:
        value = ast.literal_eval(match.group(0))
    except (ValueError, SyntaxError):
        return match.group(0)
    return repr(dict(sorted(value.items()))) if isinstance(value, dict) else match.group(0)


def normalized(script: Script, stdout: str, stderr: str) -> dict[str, list[str]]:
    """{"driver": lines in order, "workers": Ray workers' lines sorted}."""
    lines = stdout.splitlines() + [line for line in stderr.splitlines() if OWN_LOGGER.search(line)]
    driver, workers = [], []
    for line in lines:
        line = TIMESTAMP.sub("", ANSI.sub("", line)).rstrip()
        if RAY_OWN.match(line):
            continue
        worker = RAY_PREFIX.match(line)
        if worker:
            if not line[worker.end():]:
                continue  # a bare prefix: Ray flushed a worker's line in two pieces, or an empty one
            line = f"({worker.group(1)}) " + line[worker.end():]
        if any(re.search(pattern, line) for pattern, _why in script.dropped):
            continue
        line = FLAT_DICT.sub(_sorted_dict, line)
        for pattern, replacement, _why in script.varying:
            line = re.sub(pattern, replacement, line)
        (workers if worker else driver).append(line)
    return {"driver": driver, "workers": sorted(workers)}


def run_script(python: str, script_dir: Path, script: Script, as_seqflow: bool, timeout: float) -> dict:
    path = script_dir / script.path
    command = [python, str(LAUNCHER), str(path)] if as_seqflow else [python, str(path)]
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_DEDUP_LOGS="0", PYTHONDONTWRITEBYTECODE="1",
               RAY_OVERRIDE_RESOURCES=json.dumps({"CPU": RAY_CPUS}))
    env.pop("SEQFLOW_AS_TRANSFER_QUEUE", None)  # each side decides for itself
    env.pop("SEQFLOW_TRANSFER_QUEUE", None)  # a system this test process started is not the script's to join
    env.pop("RAY_ADDRESS", None)  # each script starts its own Ray instance
    process = subprocess.Popen(command, cwd=path.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)  # its own group: Ray's processes go with it
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        returncode = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate(timeout=60)
        returncode = f"no exit within {timeout:.0f} s"
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # what the script left behind (Ray's raylet, workers)
        except ProcessLookupError:
            pass
    return {"returncode": returncode, "stdout": stdout, "stderr": stderr}


def extract_scripts(destination: Path) -> Path:
    with zipfile.ZipFile(reference_peer.wheel_path()) as wheel:
        wheel.extractall(destination, [script.path for script in SCRIPTS])
    return destination


def run_all(python: str, script_dir: Path, as_seqflow: bool, timeout: float) -> dict[str, dict]:
    with concurrent.futures.ThreadPoolExecutor(PARALLEL_SCRIPTS) as pool:
        runs = {script.path: pool.submit(run_script, python, script_dir, script, as_seqflow, timeout)
                for script in SCRIPTS}
        return {path: run.result() for path, run in runs.items()}


def reference_runs(script_dir: Path) -> dict[str, dict]:
    """The scripts' runs on TransferQueue, cached per wheel and run settings
    when every script exited 0."""
    digest = hashlib.sha256(json.dumps([RUN_SETTINGS, [s.path for s in SCRIPTS]]).encode()).hexdigest()[:12]
    cache = Path(reference_peer.CACHE_DIR) / f"tq-tutorials-reference-{reference_peer.VERSION}-{digest}.json"
    if cache.exists():
        return json.loads(cache.read_text())
    runs = run_all(reference_peer.transferqueue_python(), script_dir, as_seqflow=False,
                   timeout=REFERENCE_SCRIPT_TIMEOUT)
    if all(run["returncode"] == 0 for run in runs.values()):
        cache.write_text(json.dumps(runs, indent=1))
    return runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    script_dir = extract_scripts(tmp_path_factory.mktemp("tq-tutorials"))
    try:
        reference = reference_runs(script_dir)
    except reference_peer.ReferenceUnavailable as error:
        pytest.fail(f"TransferQueue {reference_peer.VERSION}, the reference, cannot be had: {error}")
    return reference, run_all(sys.executable, script_dir, as_seqflow=True, timeout=SCRIPT_TIMEOUT)


@pytest.mark.timeout(3600)  # a first run may also install the reference venv (<= 20 min) and run the scripts there
@pytest.mark.parametrize("script", SCRIPTS, ids=[Path(s.path).stem for s in SCRIPTS])
def test_script_runs_unmodified_with_transferqueues_output(runs, script):
    reference, seqflow = runs[0][script.path], runs[1][script.path]
    assert reference["returncode"] == 0, f"on TransferQueue itself:\n{reference['stderr'][-3000:]}"
    assert seqflow["returncode"] == 0, f"on seqflow:\n{seqflow['stderr'][-3000:]}"
    expected = normalized(script, reference["stdout"], reference["stderr"])
    got = normalized(script, seqflow["stdout"], seqflow["stderr"])
    assert got["driver"] == expected["driver"]
    assert got["workers"] == expected["workers"]


def test_normalisation_keeps_what_is_deterministic_and_only_that():
    script = Script("x.py", ((r"(Got: )\[[\d, ]*\]", r"\1[N...]", "random"),), ((r"poll", "timing"),))
    stdout = ("\x1b[36m(worker pid=12, ip=10.0.0.1)\x1b[0m b {'z': 1, 'a': 2}\nGot: [3, 1]\npolled 3 times\n"
              "(raylet) WARNING: 8 PYTHON worker processes have been started\n"
              "(worker pid=13) a\n\x1b[36m(worker pid=13)\x1b[0m \n\nend\n")
    stderr = "2026-12-05 13:59:56,948 - INFO - MAIN - logged\nRay's own line\n"
    assert normalized(script, stdout, stderr) == {
        "driver": ["Got: [N...]", "", "end", "INFO - MAIN - logged"],
        "workers": ["(worker) a", "(worker) b {'a': 2, 'z': 1}"]}
