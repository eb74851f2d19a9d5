"""A seqflow object a test module hands pytest at collection (a parametrize
value) is kept by pytest past the extension's teardown, and nanobind prints
"nanobind: leaked ..." at exit. It shows only once torch is imported (as in the
full run), so the child imports torch first; collecting builds every value."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from required import require

require("torch")  # the child imports it
HERE = Path(__file__).parent
# The modules that parametrize over seqflow objects (through factories).
FILES = ["test_balance.py", "test_calibration.py", "test_samplers_python.py"]


def test_collected_parameters_do_not_outlive_the_extension():
    child = "import sys, torch, pytest; sys.exit(pytest.main(sys.argv[1:]))"
    result = subprocess.run([sys.executable, "-c", child, "--collect-only", "-q", "-p", "no:cacheprovider",
                             *(str(HERE / name) for name in FILES)], capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "nanobind: leaked" not in output, output



def test_workloads_parsed_by_name_do_not_outlive_the_extension():
    # Balancing by a workload's name caches the parsed Workload in a module dict (seqflow._arguments),
    # which a pytest run's teardown left alive past the extension's.
    child = "import sys, torch, pytest; sys.exit(pytest.main(sys.argv[1:]))"  # as in the full run
    result = subprocess.run([sys.executable, "-c", child, "-q", "-p", "no:cacheprovider", "-k", "workload",
                             str(HERE / "test_balance.py")], capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "nanobind: leaked" not in output, output
