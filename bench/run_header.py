"""The first lines every benchmark prints: how it was run and on what, so that
a table pasted elsewhere can be reproduced and read against its load."""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import sys
from pathlib import Path

import numpy as np


def run_header(seqflow) -> list[str]:
    load = os.getloadavg()
    return [
        f"$ {shlex.join(getattr(sys, 'orig_argv', [sys.executable, *sys.argv]))}",
        "",
        f"date {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}; "
        f"{platform.machine()}, {os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; "
        f"Python {platform.python_version()}, numpy {np.__version__}, "
        f"seqflow {getattr(seqflow, '__version__', '?')} ({Path(seqflow.__file__).parent})",
    ]
