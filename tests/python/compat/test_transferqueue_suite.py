"""TransferQueue 0.1.11's own tests, unmodified, pass on seqflow.

The in-scope test files of PyPI's transferqueue 0.1.11 wheel run on the real
TransferQueue (the baseline, in the reference venv of tools/reference_peer.py,
cached per wheel version) and on seqflow after
seqflow.compat.install_as_transfer_queue(). Every test that passes on
TransferQueue must pass on seqflow, except the known differences of
transferqueue_suite.toml, each with its reason; a known difference that
passes now fails this test too, so that the list only shrinks. The reference
is required: when it cannot be installed the test fails.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

import transferqueue_suite as suite
from transferqueue_suite import Comparison, Outcome, Scope, SideResult

pytestmark = pytest.mark.alone  # deadlines on wall-clock time: no other test file runs meanwhile


def test_transferqueue_tests_that_pass_on_transferqueue_pass_on_seqflow(capsys):
    scope = Scope.load()
    try:
        reference, seqflow = suite.run_both(scope, progress=lambda message: None)
    except suite.reference_peer.ReferenceUnavailable as error:
        pytest.fail(f"TransferQueue {suite.reference_peer.VERSION}, the reference, cannot be had: {error}")
    comparison = suite.compare(reference, seqflow, scope)
    with capsys.disabled():
        print(f"\nTransferQueue {suite.reference_peer.VERSION}'s tests: "
              f"{len(comparison.passed_on_transferqueue)} pass on TransferQueue, "
              f"{len(comparison.passed_on_seqflow)} of them on seqflow, "
              f"{len(comparison.known)} known differences; seqflow's run took {seqflow.seconds:.0f} s")
    problems = []
    if comparison.regressions:
        problems.append(f"{len(comparison.regressions)} tests pass on TransferQueue and fail on seqflow "
                        f"(grouped by error):\n" + _listing(comparison.regressions))
    if comparison.no_longer_different:
        problems.append(f"known differences that pass on seqflow now; remove them from {suite.SCOPE_FILE.name}: "
                        f"{comparison.no_longer_different}")
    if comparison.stale_entries:
        problems.append(f"known differences naming no test that passes on TransferQueue: {comparison.stale_entries}")
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


def _listing(failures: dict[str, Outcome]) -> str:
    return "\n".join(f"{error}\n    " + "\n    ".join(nodeids)
                     for error, nodeids in suite.failures_by_error(failures).items())


# --------------------------------------------------------------------------
# The scope file and the runner's own logic


def test_scope_file_decides_every_test_file_of_the_wheel_with_a_reason(tmp_path):
    scope = Scope.load()
    with open(suite.SCOPE_FILE, "rb") as source:
        excluded_files = suite.tomllib.load(source)["excluded_files"]
    tests_dir = suite.extract_tests(tmp_path)
    wheel_files = {str(path.relative_to(tests_dir)) for path in tests_dir.rglob("test_*.py")}
    assert wheel_files == set(scope.files) | set(excluded_files)
    assert not set(scope.files) & set(excluded_files)
    for entries in (scope.files, excluded_files, scope.excluded_tests, scope.known_differences):
        assert all(reason.strip() for reason in entries.values())


def test_entries_name_a_test_or_everything_under_a_file_class_or_parametrization():
    assert suite.entry_matches("a.py::T::test_x", "a.py::T::test_x")
    assert suite.entry_matches("a.py::T::test_x", "a.py::T")
    assert suite.entry_matches("a.py::T::test_x", "a.py")
    assert suite.entry_matches("a.py::test_x[sync]", "a.py::test_x")
    assert not suite.entry_matches("a.py::T::test_xy", "a.py::T::test_x")
    assert not suite.entry_matches("a.py::T2::test_x", "a.py::T")


def test_compare_tells_regressions_known_differences_fixed_ones_and_stale_entries():
    scope = Scope(files={}, excluded_tests={"f.py::Internal": "sockets"},
                  known_differences={"f.py::test_known": "why", "f.py::test_fixed": "why", "f.py::test_gone": "why"})
    reference = SideResult({nodeid: Outcome("passed") for nodeid in (
        "f.py::test_same", "f.py::test_broken", "f.py::test_known", "f.py::test_fixed", "f.py::Internal::test_a")})
    reference.outcomes["f.py::test_fails_there_too"] = Outcome("failed", "x")
    seqflow = SideResult({"f.py::test_same": Outcome("passed"), "f.py::test_broken": Outcome("failed", "boom"),
                          "f.py::test_known": Outcome("failed", "k"), "f.py::test_fixed": Outcome("passed"),
                          "f.py::Internal::test_a": Outcome("failed", "no sockets")})
    comparison = suite.compare(reference, seqflow, scope)
    assert comparison == Comparison(
        passed_on_transferqueue={"f.py::test_same", "f.py::test_broken", "f.py::test_known", "f.py::test_fixed"},
        passed_on_seqflow={"f.py::test_same", "f.py::test_fixed"},
        regressions={"f.py::test_broken": Outcome("failed", "boom")},
        known={"f.py::test_known": Outcome("failed", "k")},
        no_longer_different=["f.py::test_fixed"], stale_entries=["f.py::test_gone"])


def test_a_file_that_does_not_import_fails_each_of_its_tests_with_the_import_error():
    seqflow = SideResult(collect_errors={"f.py": "ImportError: cannot import name 'X'"})
    assert seqflow.outcome_of("f.py::test_a") == Outcome("error", "collection: ImportError: cannot import name 'X'")
    assert seqflow.outcome_of("g.py::test_a") == Outcome("not run")


def test_run_side_records_outcomes_and_goes_on_past_a_hanging_test(tmp_path, monkeypatch):
    monkeypatch.setattr(suite, "HANG_TIMEOUT", 8.0)  # pytest starts well within it even on a busy machine
    (tmp_path / "test_sample.py").write_text(textwrap.dedent("""
        import time, pytest

        def test_passes(): pass
        def test_fails(): assert 1 == 2, "one is not two"
        def test_hangs(): time.sleep(600)
        @pytest.mark.skip(reason="not here")
        def test_skipped(): pass
        @pytest.fixture
        def broken(): raise RuntimeError("fixture broke")
        def test_setup_error(broken): pass
        def test_after_the_hang(): pass
        """))
    (tmp_path / "test_broken_import.py").write_text("import no_such_module_here\n")
    scope = Scope(files={"test_sample.py": "", "test_broken_import.py": ""}, excluded_tests={},
                  known_differences={})
    result = suite.run_side(sys.executable, tmp_path, scope, as_seqflow=False, progress=lambda message: None)
    outcomes = {nodeid.split("::")[1]: outcome.outcome for nodeid, outcome in result.outcomes.items()}
    assert outcomes == {"test_passes": "passed", "test_fails": "failed", "test_hangs": "timeout",
                        "test_skipped": "skipped", "test_setup_error": "error", "test_after_the_hang": "passed"}
    assert "one is not two" in result.outcomes["test_sample.py::test_fails"].message
    assert "fixture broke" in result.outcomes["test_sample.py::test_setup_error"].message
    assert "no_such_module_here" in result.collect_errors["test_broken_import.py"]
    assert SideResult.from_json(json.loads(json.dumps(result.to_json()))) == result  # the baseline's cache
