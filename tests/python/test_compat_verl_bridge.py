"""verl 0.9.1's own TransferQueue code, unmodified, against seqflow after
install_as_transfer_queue(): the tqbridge decorator round trip (tensor and
non-tensor fields, extra_info), KVBatchMeta <-> BatchMeta conversion, and
the v1 ReplayBuffer sampling whole GRPO groups from trajectories put with
tags. verl reads `import transfer_queue` when its modules load, so each
scenario runs in a fresh interpreter that installs seqflow first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from required import pinned

# verl's own code runs in the scenarios' interpreters: the pinned version, or every test here fails.
pinned("verl", "0.9.1")

MODES = ("embedded", "local")


def _start(mode: str):
    import seqflow.compat

    seqflow.compat.install_as_transfer_queue()
    import transfer_queue as tq

    tq.init({"controller": {"polling_mode": True}, "seqflow": {"mode": mode}})
    return tq


def bridge_scenario(mode: str) -> dict:
    tq = _start(mode)
    import torch
    from tensordict import TensorDict
    from tensordict.tensorclass import NonTensorData, NonTensorStack
    from transfer_queue import BatchMeta, KVBatchMeta

    from verl.utils import transferqueue_utils as bridge

    assert bridge.tq is tq  # verl took seqflow, not its stand-in for a missing transfer_queue
    keys = [f"uid{i}_0_0" for i in range(4)]
    prompts = TensorDict({"x": torch.arange(12, dtype=torch.float32).reshape(4, 3),
                          "text": NonTensorStack(*[f"prompt {i}" for i in range(4)])}, batch_size=4)
    tq.kv_batch_put(keys, "train", fields=prompts, tags=[{"status": "running", "i": i} for i in range(4)])

    seen = {}

    @bridge.tqbridge()
    def double(data: TensorDict) -> TensorDict:
        seen["x"] = [row.tolist() for row in data["x"].unbind(0)]
        seen["text"] = list(data["text"])
        seen["temperature"] = data["temperature"]
        x = torch.stack(list(data["x"].unbind(0)))  # TransferQueue hands rows as a nested tensor
        return TensorDict({"y": x * 2,
                           "reply": NonTensorStack(*[t.upper() for t in data["text"]]),
                           "note": NonTensorData("done")}, batch_size=data.batch_size)

    @bridge.tqbridge()
    async def plus_one(data: TensorDict) -> TensorDict:
        return TensorDict({"z": torch.stack(list(data["y"].unbind(0))) + 1}, batch_size=data.batch_size)

    request = KVBatchMeta(keys=keys, tags=[{"status": "running"}] * 4, partition_id="train", fields=["x", "text"],
                          extra_info={"temperature": 0.7})
    answered = double(request)
    import asyncio

    answered_again = asyncio.run(plus_one(answered))
    stored = tq.kv_batch_get(keys, "train", select_fields=["y", "z", "reply"])
    meta = bridge.kv_batch_meta2batch_meta(KVBatchMeta(keys=keys, tags=[{}] * 4, partition_id="train", fields=["x"]))
    back = bridge.batch_meta2kv_batch_meta(meta)
    empty = bridge._postprocess_common(None, put_data=True, need_collect=False)
    tq.close()
    return {
        "seen": seen, "answered_type": type(answered).__name__, "answered_keys": answered.keys,
        "answered_tags": answered.tags, "answered_extra": answered.extra_info,
        "answered_again_fields": sorted(answered_again.fields),
        "y": [r.tolist() for r in stored["y"].unbind(0)], "z": [r.tolist() for r in stored["z"].unbind(0)],
        "reply": list(stored["reply"]),
        "meta": {"type": type(meta).__name__, "size": meta.size, "fields": meta.field_names},
        "back": {"keys": back.keys, "partition_id": back.partition_id, "fields": back.fields},
        "empty_size": empty.size, "empty_is_batch_meta": isinstance(empty, BatchMeta),
    }


def replay_buffer_scenario(mode: str) -> dict:
    tq = _start(mode)
    import torch
    from omegaconf import OmegaConf
    from tensordict import TensorDict

    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    # 3 prompts, GRPO n=2: prompt keys {uid} with a status tag, trajectories {uid}_{session}_0
    for p, status in enumerate(["finished", "finished", "running"]):
        uid = f"p{p}"
        tq.kv_put(uid, "train", tag={"is_prompt": True, "status": status, "global_steps": p})
        keys = [f"{uid}_{s}_0" for s in range(2)]
        tq.kv_batch_put(keys, "train", fields=TensorDict({"tokens": torch.full((2, 3), p)}, batch_size=2),
                        tags=[{"global_steps": p, "reward": float(s)} for s in range(2)])
    buffer = ReplayBuffer("sync", OmegaConf.create({}), None, "drop", OmegaConf.create({}), poll_interval=0.05)
    batch, metrics = buffer.sample(global_steps=3, partition_id="train", batch_size=2)
    tokens = [row[0].item() for row in tq.kv_batch_get(batch.keys, "train", select_fields="tokens")["tokens"].unbind(0)]
    listing = tq.kv_list("train")["train"]
    tq.close()
    return {"keys": sorted(batch.keys), "tags": sorted(t["global_steps"] for t in batch.tags),
            "tokens": sorted(tokens), "left": sorted(listing), "metrics": metrics}


def run_scenario(name: str, mode: str) -> dict:
    code = (f"import sys, json; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            f"import test_compat_verl_bridge as t; print('RESULT ' + json.dumps(t.{name}({mode!r})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, f"scenario {name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return json.loads(results[-1][len("RESULT "):])


@pytest.mark.parametrize("mode", MODES)
def test_tqbridge_round_trip(mode):
    result = run_scenario("bridge_scenario", mode)
    assert result["seen"] == {"x": [[float(3 * i + j) for j in range(3)] for i in range(4)],
                              "text": [f"prompt {i}" for i in range(4)], "temperature": 0.7}
    assert result["answered_type"] == "KVBatchMeta"
    assert result["answered_keys"] == [f"uid{i}_0_0" for i in range(4)]
    assert result["answered_tags"] == [{"status": "running"}] * 4
    assert result["answered_extra"] == {"note": "done"}  # NonTensorData outputs travel as extra_info
    assert set(result["answered_again_fields"]) >= {"x", "y", "z", "reply"}
    assert result["y"] == [[2.0 * (3 * i + j) for j in range(3)] for i in range(4)]
    assert result["z"] == [[2.0 * (3 * i + j) + 1 for j in range(3)] for i in range(4)]
    assert result["reply"] == [f"PROMPT {i}" for i in range(4)]
    assert result["meta"] == {"type": "BatchMeta", "size": 4, "fields": ["x"]}
    assert result["back"] == {"keys": [f"uid{i}_0_0" for i in range(4)], "partition_id": "train", "fields": ["x"]}
    assert result["empty_size"] == 0 and result["empty_is_batch_meta"]


@pytest.mark.parametrize("mode", MODES)
def test_replay_buffer_samples_whole_finished_groups(mode):
    result = run_scenario("replay_buffer_scenario", mode)
    # the two finished prompts (oldest first), both trajectories each; the running one stays
    assert result["keys"] == ["p0_0_0", "p0_1_0", "p1_0_0", "p1_1_0"]
    assert result["tags"] == [0, 0, 1, 1]
    assert result["tokens"] == [0, 0, 1, 1]
    assert result["left"] == ["p0_0_0", "p0_1_0", "p1_0_0", "p1_1_0", "p2", "p2_0_0", "p2_1_0"]
