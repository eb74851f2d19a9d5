"""No import cycles between seqflow's Python modules (tools/import_cycles.py),
and the checker finds the cycles it is meant to find."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("import_cycles", ROOT / "tools" / "import_cycles.py")
import_cycles = importlib.util.module_from_spec(spec)
spec.loader.exec_module(import_cycles)


def test_the_package_has_no_import_cycle():
    assert import_cycles.cycles(import_cycles.imports(ROOT / "python" / "seqflow")) == []


def test_deferred_and_relative_imports_count(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def f():\n    from . import c\n")  # deferred, relative
    (package / "c.py").write_text("import pkg.a\n")
    (package / "d.py").write_text("from pkg import a\n")  # imports into the cycle, is not part of it
    assert import_cycles.cycles(import_cycles.imports(package)) == [["pkg.a", "pkg.b", "pkg.c"]]
