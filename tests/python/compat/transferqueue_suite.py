"""Runs TransferQueue 0.1.11's own test files, unmodified, on TransferQueue
itself (the baseline, in its reference venv) and on seqflow (after
seqflow.compat.install_as_transfer_queue()), and compares the outcomes.

The test files come from the wheel at run time (tools/reference_peer.py) and
are extracted into a temporary directory: none of them is part of seqflow.
Which files and tests are in scope, and which differences are known, is in
transferqueue_suite.toml beside this file.

    .venv/bin/python tests/python/compat/transferqueue_suite.py [--report FILE]

runs both sides (the baseline from its cache when there) and prints the
failing tests grouped by error; --report also writes them as Markdown.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[2]
SCOPE_FILE = HERE / "transferqueue_suite.toml"
PLUGIN_DIR = HERE  # outcome_recorder.py and seqflow_as_transfer_queue.py
SEQFLOW_PYTHON = sys.executable
HANG_TIMEOUT = 180.0  # seconds without a finished test: the running one hangs (Ray starts take ~10 s)
RUN_TIMEOUT = 1800.0  # one side's whole run
POLL_INTERVAL = 0.5
FILE_HANGS_LIMIT = 2  # hung tests after which the rest of their file is left out
RAY_CPUS = 8

sys.path.insert(0, str(REPO_ROOT / "tools"))
import reference_peer  # noqa: E402  (tools/ is no package)


@dataclass
class Scope:
    files: dict[str, str]  # test file (relative to the wheel's tests/) -> why in scope
    excluded_tests: dict[str, str]  # node id or prefix -> why out of scope (TransferQueue's internals)
    known_differences: dict[str, str]  # node id or prefix -> why seqflow differs

    @classmethod
    def load(cls, path: Path = SCOPE_FILE) -> "Scope":
        with open(path, "rb") as source:
            data = tomllib.load(source)
        return cls(files=data["files"], excluded_tests=data.get("excluded_tests", {}),
                   known_differences=data.get("known_differences", {}))

    def digest(self) -> str:
        """Changes when the baseline's input (the files) does."""
        text = json.dumps(sorted(self.files))
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def entry_matches(nodeid: str, entry: str) -> bool:
    """An entry names a test, or every test under a file, class or parametrized test."""
    return nodeid == entry or nodeid.startswith(entry + "::") or nodeid.startswith(entry + "[")


def matching_entry(nodeid: str, entries: dict[str, str]) -> str | None:
    return next((entry for entry in entries if entry_matches(nodeid, entry)), None)


@dataclass
class Outcome:
    outcome: str  # passed / failed / skipped / error / timeout / not run
    message: str = ""


@dataclass
class SideResult:
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    collect_errors: dict[str, str] = field(default_factory=dict)  # test file -> error
    seconds: float = 0.0

    def passed(self) -> set[str]:
        return {nodeid for nodeid, result in self.outcomes.items() if result.outcome == "passed"}

    def outcome_of(self, nodeid: str) -> Outcome:
        if nodeid in self.outcomes:
            return self.outcomes[nodeid]
        test_file = nodeid.split("::", 1)[0]
        if test_file in self.collect_errors:
            return Outcome("error", f"collection: {self.collect_errors[test_file]}")
        return Outcome("not run")

    def to_json(self) -> dict:
        return {"outcomes": {nodeid: [r.outcome, r.message] for nodeid, r in self.outcomes.items()},
                "collect_errors": self.collect_errors, "seconds": self.seconds}

    @classmethod
    def from_json(cls, data: dict) -> "SideResult":
        return cls({nodeid: Outcome(*pair) for nodeid, pair in data["outcomes"].items()},
                   data["collect_errors"], data["seconds"])


def extract_tests(destination: Path) -> Path:
    """The wheel's tests/ directory, extracted under destination."""
    with zipfile.ZipFile(reference_peer.wheel_path()) as wheel:
        members = [name for name in wheel.namelist() if name.startswith("tests/")]
        if not members:
            raise reference_peer.ReferenceUnavailable(f"{reference_peer.wheel_path()} holds no tests/")
        wheel.extractall(destination, members)
    return destination / "tests"


def run_side(python: str, tests_dir: Path, scope: Scope, as_seqflow: bool, progress=print) -> SideResult:
    """Runs the in-scope files with `python -m pytest` in tests_dir; on seqflow
    without the excluded tests (TransferQueue runs them all, so that its cached
    outcomes hold whatever the exclusions become). A test that hangs (no test
    finishes for HANG_TIMEOUT) is recorded as a timeout and the run goes on from
    the tests not yet run."""
    result = SideResult()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tq-suite-run-") as scratch:
        record = Path(scratch) / "record.jsonl"
        deselect = Path(scratch) / "deselect.json"
        env = dict(os.environ, TQ_SUITE_RECORD=str(record), TQ_SUITE_DESELECT=str(deselect),
                   PYTHONPATH=os.pathsep.join(filter(None, [str(PLUGIN_DIR), os.environ.get("PYTHONPATH")])),
                   RAY_USAGE_STATS_ENABLED="0", PYTHONDONTWRITEBYTECODE="1",
                   # Ray (and TransferQueue's sockets, bound to Ray's node address) on 127.0.0.1 only
                   RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
                   # TransferQueue's controller and each storage unit ask for a CPU each: on a 2-core
                   # machine its e2e systems (controller + 2 units) would wait forever for a third
                   RAY_OVERRIDE_RESOURCES=json.dumps({"CPU": RAY_CPUS}))
        plugins = ["-p", "outcome_recorder"] + (["-p", "seqflow_as_transfer_queue"] if as_seqflow else [])
        command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--continue-on-collection-errors",
                   "--rootdir", str(tests_dir),
                   *plugins, *sorted(scope.files)]
        hangs: dict[str, int] = defaultdict(int)
        given_up: list[str] = []
        while True:
            excluded = list(scope.excluded_tests) if as_seqflow else []
            deselect.write_text(json.dumps([*excluded, *result.outcomes, *given_up]))
            hung = _run_watched(command, tests_dir, env, record, started)
            _read_record(record, result)
            if hung is None:
                break
            result.outcomes[hung] = Outcome("timeout", f"no result within {HANG_TIMEOUT:.0f} s")
            progress(f"  {hung} hung; going on without it")
            hung_file = hung.split("::", 1)[0]
            hangs[hung_file] += 1
            if hangs[hung_file] == FILE_HANGS_LIMIT:  # a module-wide fixture hangs: each test would wait as long
                progress(f"  {hung_file}: {FILE_HANGS_LIMIT} tests hung; its other tests are left out")
                given_up.append(hung_file)
    for test_file in given_up:
        result.collect_errors[test_file] = f"left out after {FILE_HANGS_LIMIT} of its tests hung"
    result.seconds = time.monotonic() - started
    return result


def _run_watched(command, cwd, env, record: Path, started: float) -> str | None:
    """Runs command; returns the node id of the test that hung, None when it ended."""
    record.write_text("")
    output = record.with_suffix(".log")
    with open(output, "wb") as log:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # its own group: Ray's processes go with it
    last_size, last_change = 0, time.monotonic()
    try:
        while process.poll() is None:
            time.sleep(POLL_INTERVAL)
            size = record.stat().st_size
            if size != last_size:
                last_size, last_change = size, time.monotonic()
            now = time.monotonic()
            if now - started > RUN_TIMEOUT:
                _stop_group(process)
                _raise_no_test(command, f"ran over {RUN_TIMEOUT:.0f} s in all:\n{_tail(output)}")
            if now - last_change > HANG_TIMEOUT:
                _stop_group(process)
                hung = _running_test(record)
                if hung is None:
                    _raise_no_test(command, f"hung outside any test:\n{_tail(output)}")
                return hung
    finally:
        if process.poll() is None:
            _stop_group(process)
    # 0: all passed, 1: some failed, 5: nothing left to run; anything else is a broken run
    if process.returncode not in (0, 1, 5) and not record.read_text().strip():
        _raise_no_test(command, f"exited {process.returncode}:\n{_tail(output)}")
    return None


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:]


def _raise_no_test(command, why: str):
    raise RuntimeError(f"`{' '.join(command)}` {why}")


def _stop_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=30)


def _running_test(record: Path) -> str | None:
    running = None
    for line in record.read_text().splitlines():
        event = json.loads(line)
        if "start" in event:
            running = event["start"]
        elif event.get("nodeid") == running:
            running = None
    return running


def _read_record(record: Path, result: SideResult) -> None:
    for line in record.read_text().splitlines():
        event = json.loads(line)
        if "collect_error" in event:
            result.collect_errors[event["collect_error"]] = event["message"]
        elif "nodeid" in event:
            result.outcomes[event["nodeid"]] = Outcome(event["outcome"], event["message"])


def baseline(tests_dir: Path, scope: Scope, progress=print) -> SideResult:
    """TransferQueue's own outcomes, cached per wheel version and scope in the reference cache."""
    cache = Path(reference_peer.CACHE_DIR) / f"tq-suite-baseline-{reference_peer.VERSION}-{scope.digest()}.json"
    if cache.exists():
        return SideResult.from_json(json.loads(cache.read_text()))
    python = reference_peer.transferqueue_python()
    progress(f"baseline: TransferQueue {reference_peer.VERSION}'s tests on TransferQueue (once; cached in {cache})")
    result = run_side(python, tests_dir, scope, as_seqflow=False, progress=progress)
    troubled = result.collect_errors or any(r.outcome == "timeout" for r in result.outcomes.values())
    if not troubled:  # a hang or an import error on TransferQueue itself is this machine's trouble: retry next time
        cache.write_text(json.dumps(result.to_json(), indent=1))
    return result


@dataclass
class Comparison:
    passed_on_transferqueue: set[str]
    passed_on_seqflow: set[str]
    regressions: dict[str, Outcome]  # passes on TransferQueue, not on seqflow, not a known difference
    known: dict[str, Outcome]  # the same, named in known_differences
    no_longer_different: list[str]  # known-difference entries whose tests all pass on seqflow now
    stale_entries: list[str]  # known-difference entries naming no test that passes on TransferQueue


def compare(reference: SideResult, seqflow: SideResult, scope: Scope) -> Comparison:
    expected = {nodeid for nodeid in reference.passed() if matching_entry(nodeid, scope.excluded_tests) is None}
    passed = seqflow.passed()
    regressions, known = {}, {}
    for nodeid in sorted(expected - passed):
        target = known if matching_entry(nodeid, scope.known_differences) else regressions
        target[nodeid] = seqflow.outcome_of(nodeid)
    covered = {entry: [nodeid for nodeid in expected if entry_matches(nodeid, entry)]
               for entry in scope.known_differences}
    no_longer = sorted(entry for entry, nodeids in covered.items() if nodeids and set(nodeids) <= passed)
    stale = sorted(entry for entry, nodeids in covered.items() if not nodeids)
    return Comparison(expected, passed & expected, regressions, known, no_longer, stale)


def failures_by_error(failures: dict[str, Outcome]) -> dict[str, list[str]]:
    """Failing tests grouped by their error's first line."""
    groups: dict[str, list[str]] = defaultdict(list)
    for nodeid, outcome in failures.items():
        lines = [line for line in outcome.message.strip().splitlines() if line.strip()]
        # a file that did not import: its last line ("E   ImportError: ...") says why
        line = lines[-1] if outcome.message.startswith("collection:") else (lines[0] if lines else "")
        # grouped by the error, each test with the line where it failed
        error = line.rsplit(" -> ", 1)[-1].strip()
        place = re.match(r"(\S+\.py:\d+): (.*)", error)
        if place:
            error = place.group(2)
        groups[f"[{outcome.outcome}] {error[:300]}"].append(f"{nodeid}  ({place.group(1)})" if place else nodeid)
    return dict(sorted(groups.items(), key=lambda item: -len(item[1])))


def report_markdown(comparison: Comparison, seqflow: SideResult) -> str:
    lines = [f"# TransferQueue {reference_peer.VERSION}'s tests on seqflow",
             "", f"passed on TransferQueue (in scope): {len(comparison.passed_on_transferqueue)}; "
             f"passed on seqflow: {len(comparison.passed_on_seqflow)}; known differences failing: "
             f"{len(comparison.known)}; unexplained failures: {len(comparison.regressions)}"]
    if seqflow.collect_errors:
        lines += ["", "## Files that do not import on seqflow", ""]
        lines += [f"- `{path}`: {error.strip().splitlines()[-1][:400]}" for path, error in seqflow.collect_errors.items()]
    for title, failures in (("Unexplained failures", comparison.regressions),
                            ("Known differences (still failing)", comparison.known)):
        lines += ["", f"## {title}, grouped by error", ""]
        for error, nodeids in failures_by_error(failures).items():
            lines += [f"### {len(nodeids)} x {error}", ""] + [f"- `{nodeid}`" for nodeid in nodeids] + [""]
    if comparison.no_longer_different:
        lines += ["", "## Known differences that pass now", ""]
        lines += [f"- `{nodeid}`" for nodeid in comparison.no_longer_different]
    return "\n".join(lines) + "\n"


def run_both(scope: Scope, progress=print) -> tuple[SideResult, SideResult]:
    with tempfile.TemporaryDirectory(prefix="tq-suite-") as scratch:
        tests_dir = extract_tests(Path(scratch))
        reference = baseline(tests_dir, scope, progress)
        progress(f"seqflow: TransferQueue {reference_peer.VERSION}'s tests on seqflow")
        seqflow = run_side(SEQFLOW_PYTHON, tests_dir, scope, as_seqflow=True, progress=progress)
    return reference, seqflow


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", type=Path, help="also write the failures as Markdown here")
    args = parser.parse_args()
    scope = Scope.load()
    reference, seqflow = run_both(scope, lambda message: print(message, file=sys.stderr, flush=True))
    comparison = compare(reference, seqflow, scope)
    text = report_markdown(comparison, seqflow)
    print(text)
    if args.report:
        args.report.write_text(text)
    print(f"seqflow side: {seqflow.seconds:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
