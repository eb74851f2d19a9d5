"""Client.reissue_inflight_prompts, embedded and remote: verl's trainer
resuming in one controller call (the prompts pending or running tagged
pending at the resumed step, their trajectories cleared with their data),
and seqflow.compat.verl.reissue_inflight_prompts against verl's own
_reissue_inflight_prompts on the same partition."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from remote_services import client_in_each_mode, client_mode, clusters, make_client  # noqa: F401 (fixtures)
from required import pinned


@pytest.fixture
def client(client_in_each_mode):  # noqa: F811
    return client_in_each_mode


def _prompt(client, uid, status, step, **extra):
    client.kv_put(uid, "train", tag={"is_prompt": True, "status": status, "global_steps": step, **extra})


def _trajectories(client, uid, count):
    client.kv_batch_put([f"{uid}_{s}_0" for s in range(count)], "train", fields={"tokens": np.arange(count)},
                        tags=[{"session": s} for s in range(count)])


def test_prompts_in_flight_are_pending_again_and_only_their_trajectories_go(client):
    _prompt(client, "running", "running", 3)
    _trajectories(client, "running", 2)
    _prompt(client, "done", "finished", 2)
    _trajectories(client, "done", 2)
    _prompt(client, "waiting", "pending", 1, source="gsm8k")
    client.kv_put("orphan_0_0", "train", tag={"session": 0})  # no prompt holds uid "orphan"
    before = client.kv_list("train")["train"]

    reissued = client.reissue_inflight_prompts("train", 9)
    assert list(reissued.keys) == ["running", "waiting"]
    assert reissued.cleared_trajectories == 2
    want = {key: tag for key, tag in before.items() if not key.startswith("running_")}
    want["running"] = {"is_prompt": True, "status": "pending", "global_steps": 9}
    want["waiting"] = {"is_prompt": True, "status": "pending", "global_steps": 9, "source": "gsm8k"}
    assert client.kv_list("train")["train"] == want
    with pytest.raises(KeyError):  # their data went with the keys
        client.kv_batch_get(["running_0_0"], "train")


def test_an_empty_or_missing_partition_reissues_nothing(client):
    assert list(client.reissue_inflight_prompts("nowhere", 1).keys) == []
    _prompt(client, "done", "finished", 2)
    reissued = client.reissue_inflight_prompts("train", 1)
    assert (list(reissued.keys), reissued.cleared_trajectories) == ([], 0)


def test_with_member_status_a_finished_prompt_whose_members_still_ran_is_reissued_whole(client):
    _prompt(client, "partial", "finished", 2)
    client.kv_batch_put(["partial_0_0", "partial_1_0"], "train", fields={"tokens": np.arange(2)},
                        tags=[{"status": "finished"}, {"status": "running"}])
    _prompt(client, "done", "finished", 2)
    client.kv_batch_put(["done_0_0", "done_1_0"], "train", fields={"tokens": np.arange(2)},
                        tags=[{"status": "finished"}, {"status": "aborted"}])
    assert list(client.reissue_inflight_prompts("train", 5).keys) == []  # verl's layout: the prompts' status only

    reissued = client.reissue_inflight_prompts("train", 5, member_status=True)
    assert (list(reissued.keys), reissued.cleared_trajectories) == (["partial"], 2)
    listed = client.kv_list("train")["train"]
    assert sorted(listed) == ["done", "done_0_0", "done_1_0", "partial"]
    assert listed["partial"] == {"is_prompt": True, "status": "pending", "global_steps": 5}
    with pytest.raises(KeyError):  # their data went with the keys
        client.kv_batch_get(["partial_0_0"], "train")


def test_with_member_status_an_unknown_member_status_is_refused_by_key(client):
    _prompt(client, "done", "finished", 2)
    client.kv_put("done_0_0", "train", tag={"status": "paused"})
    with pytest.raises(ValueError, match="member_status.*'done_0_0'"):
        client.reissue_inflight_prompts("train", 5, member_status=True)
    with pytest.raises(TypeError, match="member_status"):
        client.reissue_inflight_prompts("train", 5, member_status="yes")
    assert client.kv_list("train")["train"]["done_0_0"] == {"status": "paused"}


@pytest.mark.parametrize("arguments, named", [
    (("", 1), "partition_id"),
    (("train", 2 ** 60), "global_steps = 1152921504606846976"),
    (("train", 2 ** 63), "global_steps"),
])
def test_bad_arguments_are_refused_by_name(client, arguments, named):
    with pytest.raises(ValueError, match=named):
        client.reissue_inflight_prompts(*arguments)


# --- verl's own _reissue_inflight_prompts against the drop-in, each in a fresh interpreter (verl imports
# transfer_queue when its modules load, so seqflow installs itself first).

def _scripted_partition(tq):
    """Mixed: groups in flight (pending, running) with and without trajectories, finished and failed groups, a
    trajectory of no prompt, a prompt of another status, a key with no tag, prompt data to read back."""
    import torch
    from tensordict import TensorDict

    groups = [("p1", "pending", 2), ("r1", "running", 1), ("f1", "finished", 3), ("x1", "failure", 3),
              ("r2", "running", 2), ("odd", "paused", 1)]
    for uid, status, step in groups:
        tq.kv_batch_put([uid], "train", fields=TensorDict({"prompt": torch.tensor([[len(uid), step]])}, batch_size=1),
                        tags=[{"is_prompt": True, "status": status, "global_steps": step}])
    for uid, count in [("r1", 2), ("f1", 2), ("x1", 1), ("p1", 1), ("orphan", 1)]:
        keys = [f"{uid}_{s}_0" for s in range(count)]
        tq.kv_batch_put(keys, "train", fields=TensorDict({"tokens": torch.arange(count)}, batch_size=count),
                        tags=[{"session": s} for s in range(count)])
    tq.kv_put("untagged", "train", fields=TensorDict({"tokens": torch.tensor([7])}, batch_size=1))


class _Trainer:
    """What verl's method reads of a trainer; generate_sequences records the batch it is given."""

    def __init__(self):
        from types import SimpleNamespace

        self.trainer_mode = "async"
        self.global_steps = 12
        self.generated = []
        self.agent_loop_manager = SimpleNamespace(generate_sequences=self.generated.append)


def run_both(mode: str) -> dict:
    import seqflow.compat

    seqflow.compat.install_as_transfer_queue()
    import transfer_queue as tq
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    from seqflow.compat.verl import reissue_inflight_prompts

    results = {}
    for implementation in ("verl", "seqflow"):
        tq.init({"controller": {"polling_mode": True}, "seqflow": {"mode": mode}})
        try:
            _scripted_partition(tq)
            trainer = _Trainer()
            if implementation == "verl":
                count = PPOTrainer._reissue_inflight_prompts(trainer)
            else:
                count = reissue_inflight_prompts(trainer)
            (batch,) = trainer.generated
            results[implementation] = {
                "count": count, "listed": tq.kv_list("train")["train"],
                "prompts": [row.tolist() for row in batch["prompt"].unbind()],
                "global_steps": batch["global_steps"]}
        finally:
            tq.close()
    return results


@pytest.mark.parametrize("mode", ["embedded", "local"])
def test_the_drop_in_does_what_verls_reissue_does(mode):
    pinned("verl", "0.9.1")
    code = (f"import sys, json; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            f"import test_replay_reissue as t; print('RESULT ' + json.dumps(t.run_both({mode!r}), default=repr))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, f"failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    result = json.loads(results[-1][len("RESULT "):])
    assert result["verl"] == result["seqflow"]
    assert result["verl"]["count"] == 3  # the scenario has what it is for: p1, r1, r2 in flight
