"""python run_as_transfer_queue.py SCRIPT [ARGS...]: runs SCRIPT, unmodified,
as __main__ after the one-line switch (seqflow.compat.install_as_transfer_queue()),
so that its `import transfer_queue` gives seqflow. The processes it starts
(Ray workers) inherit the switch (docs/switching.md)."""

import os
import runpy
import sys

import seqflow.compat

seqflow.compat.install_as_transfer_queue()

script = os.path.abspath(sys.argv[1])
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(script)  # as `python SCRIPT` would have it
runpy.run_path(script, run_name="__main__")
