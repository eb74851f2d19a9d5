"""tools/reference_peer.py's TransferQueue venv: reused when complete, made
or completed otherwise (the install itself is exercised by the suite test)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools"))
import reference_peer  # noqa: E402  (tools/ is no package)


@pytest.fixture
def venv(tmp_path, monkeypatch):
    """reference_peer pointed at an empty cache; records the installs it would run."""
    monkeypatch.setattr(reference_peer, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(reference_peer, "VENV_DIR", str(tmp_path / "tq-venv"))
    installs = []
    monkeypatch.setattr(reference_peer, "_make_venv", installs.append)
    return tmp_path / "tq-venv", installs


def test_a_complete_venv_is_reused_without_installing(venv):
    venv_dir, installs = venv
    venv_dir.mkdir()
    (venv_dir / reference_peer.VENV_COMPLETE_MARKER).write_text("\n".join(reference_peer.VENV_PACKAGES) + "\n")
    assert reference_peer.transferqueue_python() == str(venv_dir / "bin" / "python")
    assert installs == []


@pytest.mark.parametrize("marker", [None, "transferqueue\ntorch==2.13.0\n"], ids=["half-made", "other packages"])
def test_a_venv_without_the_marker_of_these_packages_is_made_again(venv, marker):
    venv_dir, installs = venv
    venv_dir.mkdir()
    if marker is not None:
        (venv_dir / reference_peer.VENV_COMPLETE_MARKER).write_text(marker)
    assert reference_peer.transferqueue_python() == str(venv_dir / "bin" / "python")
    assert installs == [str(venv_dir / "bin" / "python")]


def test_the_packages_pin_transferqueue_and_torch():
    assert f"transferqueue=={reference_peer.VERSION}" in reference_peer.VENV_PACKAGES
    assert any(package.startswith("torch==") for package in reference_peer.VENV_PACKAGES)
