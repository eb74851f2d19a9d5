"""The ./run script: a second `./run demo` on an unchanged tree does not
build seqflow again, a change to a source file does; `./run help` and
`./run tests --help` print the commands instead of starting anything.
Runs the real script in a copy of the tree's build inputs, with a stand-in
for the virtual environment's python that records what it is asked to do."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_INPUTS = ("run", "CMakeLists.txt", "pyproject.toml", "build_backend", "cmake", "include", "src", "python")

# Answers every call; `-m pip install ... .` (the package build) and the
# demo script's runs are written to calls.log.
FAKE_PYTHON = """#!/usr/bin/env bash
log="$(dirname "$0")/../calls.log"
case "$*" in
  "-m pip install"*" .") echo "build" >>"$log" ;;
  "examples/demo/"*) echo "run $*" >>"$log" ;;
esac
exit 0
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    if shutil.which("dpkg-query") is None:
        pytest.skip("./run checks Debian packages with dpkg-query, which this system lacks")
    for name in BUILD_INPUTS:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, tmp_path / name)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    return tmp_path


RUN_DEMO = "run examples/demo/grpo_balance_demo.py"


def run(tree: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(tree / "run"), *args], cwd=tree, capture_output=True, text=True, timeout=120)


def calls(tree: Path) -> list[str]:
    log = tree / ".venv" / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_a_second_demo_on_an_unchanged_tree_does_not_build_again(tree):
    first = run(tree, "demo")
    assert first.returncode == 0, first.stderr
    assert calls(tree) == ["build", RUN_DEMO]
    second = run(tree, "demo")
    assert second.returncode == 0, second.stderr
    assert calls(tree) == ["build", RUN_DEMO, RUN_DEMO]
    assert "installed from this tree already" in second.stdout

    with (tree / "src" / "common" / "siphash.cc").open("a") as source:
        source.write("// changed\n")
    assert run(tree, "demo").returncode == 0
    assert calls(tree)[-2:] == ["build", RUN_DEMO], "a changed source was not built"


@pytest.mark.parametrize("args", [("help",), ("tests", "--help"), ("--help",)])
def test_help_prints_the_commands_and_starts_nothing(tree, args):
    shown = run(tree, *args)
    assert shown.returncode == 0, shown.stderr
    for command in ("./run demo", "./run tests", "./run tests TARGET", "./run bench", "./run wheel", "./run help"):
        assert command in shown.stdout
    assert calls(tree) == []


def test_an_unknown_command_prints_the_commands_and_fails(tree):
    shown = run(tree, "frobnicate")
    assert shown.returncode == 2
    assert "./run tests" in shown.stderr
