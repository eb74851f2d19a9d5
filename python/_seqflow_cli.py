"""The `seqflow` command: a console script that runs the C++ CLI kept inside
the seqflow package (seqflow/_bin/seqflow). There the wheel's repair
(auditwheel) sets the binary's RPATH to the native libraries vendored beside
the package (seqflow.libs), whatever the install scheme (venv, --user,
--target). It sits outside the package so that starting the command does not
import seqflow (numpy, the extension module)."""

from __future__ import annotations

import os
import sys


def binary_path() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "seqflow", "_bin", "seqflow")


def main() -> int:
    binary = binary_path()
    try:
        os.execv(binary, ["seqflow", *sys.argv[1:]])  # same process: signals reach the CLI itself
    except OSError as error:
        print(f"seqflow: cannot run {binary}: {error}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
