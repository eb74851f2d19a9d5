"""The package's extras cover what each optional part imports: every
third-party module the TransferQueue switch imports is in the
`transfer-queue` extra (Ray, which only its Ray path needs, in `ray`), and
StreamingDataset's torch in `torch`."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "seqflow"


def extras() -> dict[str, set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {name: {requirement.split("[")[0].split("=")[0].split(">")[0].strip() for requirement in requirements}
            for name, requirements in project["optional-dependencies"].items()}


def third_party_imports(directory: Path) -> set[str]:
    found = set()
    for path in directory.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("seqflow", "transfer_queue"):
                    found.add(top)
    return found


def test_the_transfer_queue_extra_holds_what_the_switch_imports():
    declared = extras()
    needed = third_party_imports(PACKAGE / "compat" / "transfer_queue") - {"numpy"}  # numpy: a dependency
    assert "omegaconf" in needed, "the scan no longer sees the switch's config reader"
    assert needed - {"ray"} <= declared["transfer-queue"], needed - declared["transfer-queue"]
    assert "ray" in declared["ray"]


def test_the_torch_extra_holds_torch_and_the_charts_extra_matplotlib():
    declared = extras()
    assert "torch" in declared["torch"]
    assert "matplotlib" in declared["charts"]
