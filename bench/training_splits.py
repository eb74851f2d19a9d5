"""How each row of the training benchmark spreads one rollout over DP ranks
and into packed micro-batches of at most `cap` tokens.

Every strategy returns one list of packs per rank; a pack has the fields of
seqflow.pack.PackedSequence that the model reads (input_ids, labels,
position_ids, cu_seqlens as torch tensors) and `samples`, its sample indexes.
seqflow's rows take their packs from seqflow.pack.plan + materialize; the
baselines (a contiguous split, verl's) from their own sample lists.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from tensordict import TensorDict

import seqflow.pack as sp
from seqflow.compat import verl
from training_data import Rollout


class Pack(NamedTuple):
    input_ids: torch.Tensor
    labels: torch.Tensor
    position_ids: torch.Tensor
    cu_seqlens: torch.Tensor
    samples: np.ndarray


def pack_samples(rollout: Rollout, samples) -> Pack:
    """The samples' tokens back to back, unpadded (labels = ids)."""
    samples = np.asarray(samples, dtype=np.int64)
    lengths = rollout.lengths[samples]
    ids = torch.from_numpy(np.concatenate([rollout.token_ids[i] for i in samples]))
    positions = torch.from_numpy(np.concatenate([np.arange(n, dtype=np.int64) for n in lengths]))
    cu_seqlens = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    return Pack(ids, ids, positions, cu_seqlens, samples)


def contiguous(rollout: Rollout, dp: int, cap: int) -> list[list[Pack]]:
    """The split without balancing: rank r takes the r-th run of whole
    prompts (as many prompts per rank), filled into micro-batches in order,
    a new one when the next sample would pass the cap."""
    prompts = np.array_split(np.unique(rollout.groups), dp)
    ranks = []
    for rank_prompts in prompts:
        samples = np.flatnonzero(np.isin(rollout.groups, rank_prompts))
        batches, current, tokens = [], [], 0
        for sample in samples:
            length = int(rollout.lengths[sample])
            if current and tokens + length > cap:
                batches.append(current)
                current, tokens = [], 0
            current.append(sample)
            tokens += length
        batches.append(current)
        ranks.append([pack_samples(rollout, batch) for batch in batches])
    return ranks


def verl_split(rollout: Rollout, dp: int, cap: int) -> list[list[Pack]]:
    """verl's path through seqflow.compat.verl (its functions, verl's exact
    results): get_group_balanced_partitions (Karmarkar-Karp on verl's
    workload, as many prompts per rank), then on each rank
    rearrange_micro_batches with max_token_len = cap and the micro-batch
    count agreed across ranks (same_micro_num_in_dp: the highest count)."""
    parts = verl.get_group_balanced_partitions(rollout.lengths.tolist(), rollout.groups.tolist(), dp)

    def micro_batches(part, min_count=None):
        ids = torch.nested.nested_tensor([torch.from_numpy(rollout.token_ids[i]) for i in part], layout=torch.jagged)
        batch = TensorDict({"input_ids": ids}, batch_size=[len(part)])
        _, rows = verl.rearrange_micro_batches(batch, max_token_len=cap, min_num_micro_batch=min_count)
        return [[part[row] for row in batch_rows] for batch_rows in rows]

    count = max(len(micro_batches(part)) for part in parts)
    return [[pack_samples(rollout, batch) for batch in micro_batches(part, count)] for part in parts]


def seqflow_plan(rollout: Rollout, dp: int, cap: int, workload) -> list[list[Pack]]:
    """seqflow.pack.plan (one optimizer step, unpadded packs under the cap,
    the same pack count on every rank, prompts kept whole, balanced by
    `workload`), materialized by seqflow.pack.materialize."""
    plan = sp.plan(rollout.lengths, dp_size=dp, optimizer_steps=1, pack_max_length=cap, groups=rollout.groups,
                   workload=workload, pad_to="none")
    ranks = []
    for rank in range(dp):
        packed = sp.materialize(plan, rollout.token_ids, rank=rank, step=0, backend="torch")
        ranks.append([Pack(p.input_ids, p.labels, p.position_ids, p.cu_seqlens, np.asarray(p.samples))
                      for p in packed])
    return ranks


def pack_lengths(pack: Pack) -> np.ndarray:
    """The sequence lengths of a pack (its micro-batch's lengths)."""
    return np.diff(pack.cu_seqlens.numpy()).astype(np.int64)
