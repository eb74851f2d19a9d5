"""verl 0.9.1's V1 trainer resuming on seqflow's engine.

    trainer._reissue_inflight_prompts()                    # verl: trainer_base.py

becomes

    from seqflow.compat.verl import reissue_inflight_prompts
    reissue_inflight_prompts(trainer)

with verl's answer (how many prompts were re-issued) and the same effect:
the partition's prompts whose status is pending or running are tagged
``{"is_prompt": True, "status": "pending", "global_steps": trainer.global_steps}``,
their old trajectory keys ``{uid}_...`` are cleared and their prompt data
(read with kv_batch_get, as verl reads it, global_steps set to the resumed
step) goes to ``trainer.agent_loop_manager.generate_sequences``. verl lists
every key of the partition to find them; here the controller finds, re-tags
and clears them in one call (``Client.reissue_inflight_prompts``), under its
lock, so nothing in between sees half of it.

A ReplayBuffer made with ``member_status=True`` resumes with
``reissue_inflight_prompts(trainer, member_status=True)``: a finished prompt
whose members were still generating is re-issued too (verl's layout would
leave its group in flight forever).
"""

from __future__ import annotations

import logging
from typing import Any

from seqflow.client import Client

logger = logging.getLogger(__name__)


def _default_client() -> Client:
    from seqflow.compat.transfer_queue import interface

    return interface._seqflow()


def reissue_inflight_prompts(trainer: Any, partition_id: str = "train", *, member_status: bool = False) -> int:
    """verl's ``_reissue_inflight_prompts`` for ``trainer`` (its trainer_mode,
    global_steps and agent_loop_manager), on TransferQueue's client
    (``transfer_queue.init()``, seqflow's compat layer). ``member_status``:
    as the ReplayBuffer's (a finished prompt whose members were still
    generating is re-issued too)."""
    if trainer.trainer_mode == "sync":
        return 0
    from transfer_queue import kv_batch_get
    from verl.utils import tensordict_utils as tu

    reissued = _default_client().reissue_inflight_prompts(partition_id, trainer.global_steps,
                                                           member_status=member_status)
    if not reissued.keys:
        return 0
    batch = kv_batch_get(keys=list(reissued.keys), partition_id=partition_id)
    # A new dispatch attempt for the resumed step, as verl's.
    tu.assign_non_tensor_data(batch, "global_steps", trainer.global_steps)
    trainer.agent_loop_manager.generate_sequences(batch)
    logger.info("Re-issued %d in-flight prompts for step %d; cleared %d old trajectories from partition %s",
                len(reissued.keys), trainer.global_steps, reissued.cleared_trajectories, partition_id)
    return len(reissued.keys)
