"""checkpoint_root (--checkpoint-root): services save and load the
checkpoints clients ask for only under that directory; a path outside it,
through '..' or a symlink included, gets a ValueError naming the root, and
neither the files there nor the services' state change."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from remote_services import clusters  # noqa: F401 (fixture)


@pytest.fixture(params=[False, True], ids=["in-process", "processes"])
def rooted(request, clusters, tmp_path):
    """(a client of services with checkpoint root tmp_path/root, the root)."""
    root = tmp_path / "root"
    root.mkdir()
    args = {"checkpoint_root": str(root)}
    cluster = clusters(2, processes=request.param, controller_args=args, storage_args=args)
    return cluster.client(), root


def test_checkpoints_under_the_root_save_and_load(rooted):
    client, root = rooted
    client.put({"x": np.arange(4)}, partition_id="p")
    client.save_checkpoint(root / "run" / "step_1")
    client.put({"x": np.arange(2)}, partition_id="later")
    client.load_checkpoint(root / "run" / "step_1")
    assert client.get_partition_list() == ["p"]
    assert client.get_meta(["x"], 4, "p", task_name="t").size == 4
    assert sorted(os.listdir(root / "run")) == ["step_1"]  # the load's backup copy is gone


def test_paths_outside_the_root_are_refused_and_nothing_changes(rooted, tmp_path):
    client, root = rooted
    client.put({"x": np.arange(4)}, partition_id="p")
    client.save_checkpoint(root / "good")
    (tmp_path / "elsewhere").mkdir()
    (root / "link").symlink_to(tmp_path / "elsewhere")
    for outside in [tmp_path / "elsewhere" / "ckpt", root / ".." / "escaped", root / "link" / "ckpt"]:
        with pytest.raises(ValueError, match=f"outside the service's checkpoint root '{root}'"):
            client.save_checkpoint(outside)
    assert os.listdir(tmp_path / "elsewhere") == []
    assert not (tmp_path / "escaped").exists()

    shutil.copytree(root / "good", tmp_path / "elsewhere" / "copy")
    client.put({"x": np.arange(2)}, partition_id="after")
    with pytest.raises(ValueError, match="outside the service's checkpoint root"):
        client.load_checkpoint(tmp_path / "elsewhere" / "copy")
    assert sorted(client.get_partition_list()) == ["after", "p"]


def test_the_ray_config_key_reaches_both_services():
    from seqflow.remote import _service_settings
    controller, storage = _service_settings({"checkpoint_root": "/data/ckpt"})
    assert controller["checkpoint_root"] == storage["checkpoint_root"] == "/data/ckpt"
