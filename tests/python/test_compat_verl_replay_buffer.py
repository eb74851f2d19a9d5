"""Differential: verl 0.9.1's own V1 ReplayBuffer / ReplayBufferAsync (on
seqflow's TransferQueue compat layer) and seqflow.compat.verl's drop-ins
(the loop in the engine) fed the same scripted scenarios select the same
trajectories, evict the same groups, ask refill_fn for the same counts and
return the same metrics. verl reads `import transfer_queue` when its modules
load, so each scenario runs in a fresh interpreter that installs seqflow
first, then runs the script once per implementation on a fresh store."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from required import pinned

pinned("verl", "0.9.1")

PARTITION = "train"


class Script:
    """Puts verl's keys: prompt {uid} (is_prompt, status, global_steps) and
    trajectories {uid}_{s}_0 with the reward as data only, as verl's agent
    loop writes them: rm_scores (the reward on one token) and extra_fields
    (reward_extra_info with the reward as "acc"); their tags carry no reward."""

    def __init__(self, tq, refill_rewards=()):
        self.tq = tq
        self.refills: list[int] = []
        self.refill_rewards = list(refill_rewards)  # one reward list per refilled prompt, then mixed
        self.next_refill = 0

    def prompt(self, uid, status, step):
        self.tq.kv_put(uid, PARTITION, tag={"is_prompt": True, "status": status, "global_steps": step})

    def trajectories(self, uid, rewards):
        import torch
        from tensordict import TensorDict

        from tensordict import NonTensorData, NonTensorStack

        keys = [f"{uid}_{s}_0" for s in range(len(rewards))]
        scores = torch.tensor([[r, 0.0] for r in rewards], dtype=torch.float32)
        extra = NonTensorStack(*[NonTensorData({"reward_extra_info": {"acc": r}}) for r in rewards])
        fields = TensorDict({"rm_scores": scores, "extra_fields": extra}, batch_size=len(rewards))
        self.tq.kv_batch_put(keys, PARTITION, fields=fields, tags=[{"session": s} for s in range(len(rewards))])

    def group(self, uid, status, step, rewards=(0.0, 1.0)):
        self.prompt(uid, status, step)
        if rewards:
            self.trajectories(uid, list(rewards))

    def refill(self, count):
        """verl's refill_fn: count new prompts, each finished at once (steps
        100, 101, ...: distinct, so no tie decides a selection)."""
        self.refills.append(count)
        for _ in range(count):
            rewards = self.refill_rewards.pop(0) if self.refill_rewards else (0.0, 1.0)
            self.group(f"r{self.next_refill}", "finished", 100 + self.next_refill, rewards)
            self.next_refill += 1

    def keys(self):
        return sorted(self.tq.kv_list(PARTITION).get(PARTITION, {}))


def _buffer(implementation, mode, script, **options):
    from omegaconf import OmegaConf

    if implementation == "verl":
        from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync
    else:
        from seqflow.compat.verl import ReplayBuffer, ReplayBufferAsync
    cls = ReplayBufferAsync if mode == "async" else ReplayBuffer
    options.setdefault("max_off_policy_threshold", None)
    options.setdefault("max_off_policy_strategy", "drop")
    return cls(mode, OmegaConf.create({}), sampler_kwargs=OmegaConf.create({}), poll_interval=0.05,
               refill_fn=script.refill, **options)


def _sampled(script, buffer, global_steps, batch_size):
    batch, metrics = buffer.sample(global_steps, PARTITION, batch_size)
    return {"keys": batch.keys, "tags": batch.tags, "metrics": metrics, "refills": list(script.refills),
            "left": script.keys()}


def async_drop(tq, implementation):
    script = Script(tq, refill_rewards=[(1.0, 1.0)])  # the first refilled group is filtered again
    for uid, status, step, rewards in [("old", "finished", 1, (0.0, 1.0)), ("older", "finished", 0, (1.0, 0.0)),
                                       ("same", "finished", 8, (1.0, 1.0)), ("failed", "failure", 8, (0.0,)),
                                       ("fresh", "finished", 9, (0.0, 1.0)), ("busy", "running", 9, ()),
                                       ("fresh2", "finished", 8, (0.5, 1.0))]:
        script.group(uid, status, step, rewards)
    buffer = _buffer(implementation, "async", script, max_off_policy_threshold=3, filter_groups_metric="reward")
    first = _sampled(script, buffer, 10, 3)
    script.group("busy", "finished", 9, (0.0, 1.0))
    second = _sampled(script, buffer, 11, 2)
    return {"first": first, "second": second}


def async_dapo_extra_info(tq, implementation):
    """DAPO on reward_extra_info["acc"], rewards that are not 0 or 1: three
    0.1s are not one value for verl (numpy's std of them is 1.4e-17), two
    0.5s are; a group of one is never filtered."""
    script = Script(tq, refill_rewards=[(0.25, 0.25), (0.2, 0.7)])
    for uid, step, rewards in [("tenths", 1, (0.1, 0.1, 0.1)), ("halves", 2, (0.5, 0.5)), ("mixed", 3, (0.2, 0.7)),
                               ("single", 4, (0.4,)), ("sevenths", 5, (0.7, 0.7, 0.7))]:
        script.group(uid, "finished", step, rewards)
    buffer = _buffer(implementation, "async", script, filter_groups_metric="acc")
    first = _sampled(script, buffer, 6, 4)
    second = _sampled(script, buffer, 7, 1)
    return {"first": first, "second": second}


def async_count_and_wait(tq, implementation):
    script = Script(tq)
    script.group("a", "finished", 1)
    script.group("b", "failure", 2, (0.0,))
    script.group("c", "finished", 3)
    buffer = _buffer(implementation, "async", script, max_off_policy_threshold=2)
    count = buffer.get_sampleable_count(3, PARTITION)
    uids, metrics = buffer.wait_for_sampleable(3, PARTITION, 2)
    return {"count": count, "uids": sorted(uids), "metrics": metrics, "refills": script.refills,
            "left": script.keys()}


def async_wait_gate(tq, implementation):
    script = Script(tq)
    script.group("done", "finished", 5)
    script.group("done2", "finished", 4)
    script.prompt("slow", "running", 3)
    buffer = _buffer(implementation, "async", script, max_off_policy_threshold=3, max_off_policy_strategy="wait")

    def finish_slow():
        time.sleep(0.4)
        script.trajectories("slow", [0.0, 1.0])
        script.prompt("slow", "finished", 3)

    finisher = threading.Thread(target=finish_slow)
    finisher.start()
    started = time.monotonic()
    sampled = _sampled(script, buffer, 5, 1)
    waited = time.monotonic() - started
    finisher.join(timeout=30)
    return {"sampled": sampled, "held": waited >= 0.3}


def sync_dapo(tq, implementation):
    # refilled groups: two filtered again, two with signal
    script = Script(tq, refill_rewards=[(0.3, 0.3), (0.0, 1.0), (0.0, 0.6), (0.0, 0.0)])
    for uid, step, rewards in [("ok1", 1, (0.0, 1.0)), ("ok2", 2, (0.9, 0.1)), ("same1", 1, (0.7, 0.7, 0.7)),
                               ("same2", 2, (0.0, 0.0))]:
        script.group(uid, "finished", step, rewards)
    buffer = _buffer(implementation, "sync", script, filter_groups_metric="reward", train_batch_size=2,
                     gen_batch_size=2, max_inflight_gen_batches=2)
    return _sampled(script, buffer, 3, 3)


def sync_failed(tq, implementation):
    script = Script(tq)
    script.group("ok", "finished", 1)
    script.prompt("failed", "failure", 0)
    script.group("failed_with_data", "failure", 2, (0.0,))
    buffer = _buffer(implementation, "sync", script, sync_refill_failed_groups=True, gen_batch_size=1)
    return _sampled(script, buffer, 3, 3)


def sync_plain(tq, implementation):
    script = Script(tq)
    for uid, status, step in [("c", "finished", 3), ("a", "finished", 1), ("r", "running", 0), ("b", "failure", 2)]:
        script.group(uid, status, step)
    buffer = _buffer(implementation, "sync", script)
    return _sampled(script, buffer, 4, 2)


def run_both(name: str, mode: str) -> dict:
    import seqflow.compat

    seqflow.compat.install_as_transfer_queue()
    import transfer_queue as tq

    results = {}
    for implementation in ("verl", "seqflow"):
        tq.init({"controller": {"polling_mode": True}, "seqflow": {"mode": mode}})
        try:
            results[implementation] = globals()[name](tq, implementation)
        finally:
            tq.close()
    return results


def run_scenario(name: str, mode: str) -> dict:
    code = (f"import sys, json; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            f"import test_compat_verl_replay_buffer as t; "
            f"print('RESULT ' + json.dumps(t.run_both({name!r}, {mode!r}), default=repr))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, f"scenario {name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return json.loads(results[-1][len("RESULT "):])


def _same(verl, seqflow, where="result"):
    """Equal, floats to 1e-9 (a mean over passes is summed in another order)."""
    if isinstance(verl, dict):
        assert isinstance(seqflow, dict) and set(verl) == set(seqflow), f"{where}: {verl} != {seqflow}"
        for key in verl:
            _same(verl[key], seqflow[key], f"{where}[{key!r}]")
    elif isinstance(verl, list):
        assert isinstance(seqflow, list) and len(verl) == len(seqflow), f"{where}: {verl} != {seqflow}"
        for i, (a, b) in enumerate(zip(verl, seqflow)):
            _same(a, b, f"{where}[{i}]")
    elif isinstance(verl, float) or isinstance(seqflow, float):
        assert math.isclose(float(verl), float(seqflow), rel_tol=1e-9), f"{where}: {verl} != {seqflow}"
    else:
        assert verl == seqflow, f"{where}: {verl!r} != {seqflow!r}"


SCENARIOS = ["async_drop", "async_dapo_extra_info", "async_count_and_wait", "async_wait_gate", "sync_dapo", "sync_failed", "sync_plain"]


@pytest.mark.parametrize("mode", ["embedded", "local"])
@pytest.mark.parametrize("name", SCENARIOS)
def test_seqflow_drop_in_matches_verl(name, mode):
    result = run_scenario(name, mode)
    _same(result["verl"], result["seqflow"])
    # the scenarios exercise what they are named for
    if name == "async_drop":
        metrics = result["verl"]["first"]["metrics"]
        assert metrics["training/off_policy/evicted_samples"] == 2
        assert metrics["training/filter_groups/evicted_samples"] >= 2
        assert metrics["training/rollout_failure/evicted_samples"] == 1
    if name == "async_dapo_extra_info":  # filtered: the two 0.5s; served: three 0.1s, three 0.7s (std > 0)
        first, second = result["verl"]["first"], result["verl"]["second"]
        assert "0.5" in first["metrics"]["_dapo_filtered_reward_counts"]
        assert {"tenths_0_0", "sevenths_0_0"} <= set(first["keys"] + second["keys"])
    if name == "sync_dapo":
        assert result["verl"]["metrics"]["training/filter_groups/discarded_surplus_samples"] >= 1
        assert result["verl"]["refills"]
    if name == "sync_failed":
        assert result["verl"]["refills"] == [1]
    if name == "async_wait_gate":
        assert result["verl"]["held"] and result["verl"]["sampled"]["keys"] == ["slow_0_0", "slow_1_0"]
