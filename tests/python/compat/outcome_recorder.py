"""pytest plugin (-p outcome_recorder) for runs of TransferQueue's own test
files: appends one JSON line per event to $TQ_SUITE_RECORD, so a run killed
for hanging still tells which tests finished and which one hung, and leaves
out the tests listed in $TQ_SUITE_DESELECT (a JSON list of node ids, or of
prefixes ending in "::" or "[").

Lines: {"start": nodeid}, {"nodeid", "outcome", "message"} once a test is
over (outcome passed / failed / skipped / error, the worst of its phases), and
{"collect_error": path, "message"} for a file that did not import.
"""

from __future__ import annotations

import json
import os

import pytest

_phases: dict[str, list] = {}


def _write(record: dict) -> None:
    with open(os.environ["TQ_SUITE_RECORD"], "a") as out:
        out.write(json.dumps(record) + "\n")


def _message(report) -> str:
    """The error's last line and place, after the test file's own line that led
    there when the error comes from elsewhere (the library under test)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is None:
        return str(report.longrepr)[-2000:]
    message = f"{os.path.basename(crash.path)}:{crash.lineno}: {crash.message}"
    test_file = os.path.basename(report.location[0])
    if os.path.basename(crash.path) == test_file:
        return message
    for entry in reversed(getattr(report.longrepr.reprtraceback, "reprentries", [])):
        place = getattr(entry, "reprfileloc", None)
        if place is not None and os.path.basename(place.path) == test_file:
            source = " ".join(line[1:].strip() for line in entry.lines if line.startswith(">")).strip()
            return f"{test_file}:{place.lineno}: `{source[:200]}` -> {message}"
    return message


def _deselected(nodeid: str, entries: list[str]) -> bool:
    return any(nodeid == entry or (entry.endswith(("::", "[")) and nodeid.startswith(entry))
               or nodeid.startswith(entry + "::") or nodeid.startswith(entry + "[") for entry in entries)


def pytest_collection_modifyitems(config, items):
    path = os.environ.get("TQ_SUITE_DESELECT")
    if not path:
        return
    with open(path) as source:
        entries = json.load(source)
    kept, dropped = [], []
    for item in items:
        (dropped if _deselected(item.nodeid, entries) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_collectreport(report):
    if report.failed:
        _write({"collect_error": report.nodeid, "message": _message(report)})


def pytest_runtest_logstart(nodeid, location):
    _write({"start": nodeid})


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    _phases.setdefault(report.nodeid, []).append(report)
    if report.when != "teardown":
        return
    reports = _phases.pop(report.nodeid)
    call = next((r for r in reports if r.when == "call"), None)
    bad = next((r for r in reports if r.failed), None)
    if bad is not None:
        outcome = "failed" if bad.when == "call" else "error"
        message = f"{bad.when}: {_message(bad)}" if bad.when != "call" else _message(bad)
    elif any(r.skipped for r in reports):
        skipped = next(r for r in reports if r.skipped)
        outcome, message = "skipped", _message(skipped)
    else:
        outcome, message = ("passed" if call is not None else "error"), ""
    _write({"nodeid": report.nodeid, "outcome": outcome, "message": message})
