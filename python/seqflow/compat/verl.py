"""verl 0.9.1's ``verl.utils.seqlen_balancing`` on seqflow's engines.

The same names, signatures, argument types and return shapes, so that

    from verl.utils.seqlen_balancing import rearrange_micro_batches

becomes

    from seqflow.compat.verl import rearrange_micro_batches

What stays the same: karmarkar_karp, get_seqlen_balanced_partitions,
greedy_partition and get_group_balanced_partitions return verl's partitions
exactly; calculate_workload and log_seqlen_unbalance verl's values. Micro-batch
plans hold at most ``max_token_len`` tokens each (as verl 0.9.1's do) and never
need more micro-batches than verl's: seqflow's micro-batch planner often needs
fewer. Where verl's own Karmarkar-Karp split at the chosen count fits the cap,
the plan is verl's, micro-batch for micro-batch.

What differs, on purpose:
- bad input raises ``VerlArgumentError``, an AssertionError (what verl raises)
  that is also a ValueError (what seqflow raises), with a message naming the
  parameter and the value; verl's ValueErrors stay ValueErrors;
- lengths and workloads are integers; integer tensors are worked on in int64
  (verl's calculate_workload wraps around on int32 tensors);
- get_reverse_idx and restore_dynamic_batch check that the indexes are a
  permutation instead of returning a silently wrong order;
- get_group_balanced_partitions keeps every uid whole even when its samples
  are not adjacent (verl splits such a uid into separate groups);
- a batch whose lengths are all zero gets one micro-batch (verl fails).
"""

from __future__ import annotations

import contextlib
import copy
from itertools import chain

import numpy as np
import torch
from torch import distributed as dist

from seqflow import balance, pack
from seqflow._arrays import as_int64_array
from seqflow._seqflow import balance as _native_balance
from seqflow._seqflow import pack as _native_pack

__all__ = [
    "VerlArgumentError",
    "calculate_workload",
    "karmarkar_karp",
    "greedy_partition",
    "get_seqlen_balanced_partitions",
    "log_seqlen_unbalance",
    "ceildiv",
    "roundup_divisible",
    "rearrange_micro_batches",
    "get_reverse_idx",
    "prepare_dynamic_batch",
    "restore_dynamic_batch",
    "get_group_balanced_partitions",
    "ReplayBuffer",
    "ReplayBufferAsync",
    "reissue_inflight_prompts",
]

# seqflow.balance's "verl" workload is the same model: 24576 * L + L * L.
_LINEAR_COST = 24576
# Above this length 24576 * L + L * L no longer fits in int64.
_LONGEST_COSTED_LENGTH = 3_000_000_000


class VerlArgumentError(AssertionError, ValueError):
    """Bad input. An AssertionError, as verl raises, so that code catching
    verl's errors keeps working; and a ValueError, as seqflow raises."""


@contextlib.contextmanager
def _as_verl_error():
    """seqflow's engines raise ValueError on bad input; verl asserts."""
    try:
        yield
    except VerlArgumentError:
        raise
    except ValueError as error:
        raise VerlArgumentError(str(error)) from None


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise VerlArgumentError(message)


def _integer(value, name: str, *, minimum: int | None = None) -> int:
    _require(
        isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)),
        f"{name} must be an integer, got {value!r}",
    )
    value = int(value)
    if minimum is not None:
        _require(value >= minimum, f"{name} must be >= {minimum}, got {value}")
    return value


def _int_list(values, name: str) -> list:
    """Python ints of a 1-D sequence, array or tensor of integers."""
    with _as_verl_error():
        return as_int64_array(values, name, allow_negative=True).tolist()


# ---------------------------------------------------------------------------
# Partitioning


def calculate_workload(seqlen_list):
    """verl's attention-aware cost of sequences: 24576 * L + L * L.

    seqlen_list: a tensor (the result is a tensor on the same device), a
    numeric numpy array (an array), a list or tuple of integer lengths (a
    list) or one length. Integer lengths are worked on in int64.
    """
    if isinstance(seqlen_list, torch.Tensor):
        lengths = seqlen_list
        if not lengths.is_floating_point():
            lengths = lengths.long()
            _require(
                not bool((lengths.abs() > _LONGEST_COSTED_LENGTH).any()),
                f"seqlen_list has a length beyond {_LONGEST_COSTED_LENGTH}: its workload overflows int64",
            )
        return _LINEAR_COST * lengths + lengths * lengths
    if isinstance(seqlen_list, np.ndarray) and seqlen_list.dtype.kind in "biuf":
        return calculate_workload(torch.from_numpy(seqlen_list)).numpy()
    if isinstance(seqlen_list, (list, tuple, np.ndarray)):
        return [_LINEAR_COST * length + length * length for length in _int_list(seqlen_list, "seqlen_list")]
    length = _integer(seqlen_list, "seqlen_list")
    return _LINEAR_COST * length + length * length


def karmarkar_karp(seqlen_list: list[int], k_partitions: int, equal_size: bool) -> list[list[int]]:
    """verl's karmarkar_karp: k lists of indexes into seqlen_list, in verl's
    order (largest part first, items in the order verl adds them). With
    equal_size every part holds len(seqlen_list) / k_partitions items."""
    with _as_verl_error():
        return balance.karmarkar_karp(seqlen_list, k_partitions, equal_size)


def get_seqlen_balanced_partitions(seqlen_list: list[int], k_partitions: int, equal_size: bool):
    """verl's get_seqlen_balanced_partitions: karmarkar_karp's parts, each
    sorted; every part non-empty (needs len(seqlen_list) >= k_partitions)."""
    with _as_verl_error():
        return balance.get_seqlen_balanced_partitions(seqlen_list, k_partitions, equal_size)


def greedy_partition(seqlen_list: list[int], k_partitions: int, equal_size: bool) -> list[list[int]]:
    """verl's greedy_partition: items in the given order, each to the part
    with the smallest sum so far (the first such part on ties). equal_size
    adds sum(seqlen_list) + 1 to every item, so that counts are evened first,
    and needs len(seqlen_list) to be a multiple of k_partitions."""
    values = _int_list(seqlen_list, "seqlen_list")
    k = _integer(k_partitions, "k_partitions", minimum=1)
    with _as_verl_error():
        return _native_balance.greedy_partition(values, k, bool(equal_size))


def get_group_balanced_partitions(seqlen_list: list[int], uid_list: list, k_partitions: int) -> list[list[int]]:
    """verl's get_group_balanced_partitions: k parts of sample indexes (each
    sorted), samples of one uid always in one part, the same number of uid
    groups in every part, balanced by calculate_workload. Groups are numbered
    by first appearance; verl's result exactly when every uid's samples are
    adjacent (verl's assumption), and uids stay whole when they are not."""
    with _as_verl_error():
        lengths = as_int64_array(seqlen_list, "seqlen_list", allow_negative=True)
    if isinstance(uid_list, (torch.Tensor, np.ndarray)):
        uid_list = uid_list.tolist()
    # The engine groups integers: each distinct uid (any hashable) becomes one.
    number_of: dict = {}
    numbers = np.empty(len(uid_list), dtype=np.int64)
    for index, uid in enumerate(uid_list):
        try:
            numbers[index] = number_of.setdefault(uid, len(number_of))
        except TypeError:
            raise VerlArgumentError(f"uid_list[{index}] = {uid!r} is not hashable") from None
    k = _integer(k_partitions, "k_partitions", minimum=1)
    with _as_verl_error():
        return _native_balance.get_group_balanced_partitions(lengths, numbers, k)


def log_seqlen_unbalance(seqlen_list: list[int], partitions: list[list[int]], prefix):
    """verl's balance metrics: min, max and min-max difference of the token
    sums of consecutive chunks of len(seqlen_list) // len(partitions) samples
    (the split before balancing), the min and max of the partitions' sums, and
    the mean per partition; keys are "{prefix}/min" and so on."""
    lengths = _int_list(seqlen_list, "seqlen_list")
    k = len(partitions)
    _require(k > 0, "partitions must not be empty")
    chunk = len(lengths) // k
    _require(chunk > 0, f"seqlen_list has {len(lengths)} samples, fewer than the {k} partitions")
    chunk_sums = [sum(lengths[start : start + chunk]) for start in range(0, len(lengths), chunk)]
    part_sums = []
    for p, part in enumerate(partitions):
        indexes = _int_list(part, f"partitions[{p}]")
        for index in indexes:
            _require(
                0 <= index < len(lengths),
                f"partitions[{p}] holds index {index}, outside seqlen_list's {len(lengths)} samples",
            )
        part_sums.append(sum(lengths[index] for index in indexes))
    return {
        f"{prefix}/min": min(chunk_sums),
        f"{prefix}/max": max(chunk_sums),
        f"{prefix}/minmax_diff": max(chunk_sums) - min(chunk_sums),
        f"{prefix}/balanced_min": min(part_sums),
        f"{prefix}/balanced_max": max(part_sums),
        f"{prefix}/mean": sum(lengths) / k,
    }


def ceildiv(a: int, b: int) -> int:
    """The smallest integer >= a / b."""
    if b == 0:
        raise ZeroDivisionError(f"ceildiv: b must be non-zero, got a={a!r}, b={b!r}")
    quotient, remainder = divmod(a, b)
    return quotient + (1 if remainder else 0)


def roundup_divisible(a: int, b: int) -> int:
    """The smallest multiple of b that is >= a (b > 0)."""
    if b == 0:
        raise ZeroDivisionError(f"roundup_divisible: b must be positive, got a={a!r}, b={b!r}")
    _require(b > 0, f"roundup_divisible: b must be positive, got a={a!r}, b={b!r}")
    return ceildiv(a, b) * b


# ---------------------------------------------------------------------------
# Indexes


def _inverse(order, name: str) -> list[int]:
    with _as_verl_error():
        return pack.inverse_permutation(as_int64_array(order, name)).tolist()


def get_reverse_idx(idx_map):
    """The inverse of a permutation: output[idx_map[i]] = i. A list for a
    list or tuple; a tensor or array for a tensor or array."""
    inverse = _inverse(idx_map, "idx_map")
    if isinstance(idx_map, torch.Tensor):
        return torch.tensor(inverse, dtype=idx_map.dtype, device=idx_map.device)
    if isinstance(idx_map, np.ndarray):
        return np.asarray(inverse, dtype=idx_map.dtype)
    return inverse


def _select_rows(tensor: torch.Tensor, rows: list[int]) -> torch.Tensor:
    """tensor[rows]; for a nested (jagged) tensor too, keeping its ragged
    dimension."""
    if not tensor.is_nested:
        return tensor[torch.as_tensor(rows, dtype=torch.long, device=tensor.device)]
    pieces = tensor.unbind()
    chosen = [pieces[row] for row in rows]
    ragged_dim = getattr(tensor, "_ragged_idx", 1)
    if not chosen:
        raise VerlArgumentError("cannot select zero rows of a nested tensor")
    values = torch.cat(chosen, dim=ragged_dim - 1)
    sizes = torch.tensor([piece.shape[ragged_dim - 1] for piece in chosen], dtype=torch.long)
    offsets = torch.zeros(len(chosen) + 1, dtype=torch.long)
    torch.cumsum(sizes, dim=0, out=offsets[1:])
    return torch.nested.nested_tensor_from_jagged(values, offsets.to(values.device), jagged_dim=ragged_dim)


def restore_dynamic_batch(data: torch.Tensor, batch_idx_list: list[list[int]]) -> torch.Tensor:
    """Rows of `data`, laid out in micro-batch order (the concatenation of
    batch_idx_list), put back in the original order. Nested tensors too."""
    order = list(chain.from_iterable(batch_idx_list))
    _require(
        len(order) == data.shape[0],
        f"batch_idx_list holds {len(order)} indexes but data has {data.shape[0]} rows",
    )
    return _select_rows(data, _inverse(order, "batch_idx_list"))


# ---------------------------------------------------------------------------
# Micro-batches


def _select_tensordict(batch, rows: list[int]):
    """The TensorDict of `rows` of batch: tensors (nested ones too) and
    per-sample non-tensor stacks indexed, scalar non-tensor data kept."""
    from tensordict import TensorDict

    selected = {}
    index = None
    for key, value in batch.items():
        if isinstance(value, torch.Tensor):
            selected[key] = _select_rows(value, rows)
        elif value.shape:  # NonTensorStack: one entry per sample
            if index is None:
                index = torch.as_tensor(rows, dtype=torch.long)
            selected[key] = value[index]
        else:  # NonTensorData: one value for the whole batch
            selected[key] = value
    return TensorDict(source=selected, batch_size=[len(rows)])


def _effective_lengths(batch) -> tuple[np.ndarray, int]:
    """Real tokens per sample, and the longest sample verl's check allows for
    (the padded width, or the longest nested sequence)."""
    _require("input_ids" in batch.keys(), f"batch has no 'input_ids'; its keys are {sorted(batch.keys())}")
    input_ids = batch["input_ids"]
    if input_ids.is_nested:
        lengths = input_ids.offsets().diff()
        longest = int(lengths.max()) if lengths.numel() else 0
    else:
        _require(
            "attention_mask" in batch.keys(),
            f"a padded batch needs 'attention_mask'; its keys are {sorted(batch.keys())}",
        )
        mask = batch["attention_mask"]
        lengths = mask.sum(dim=1)
        longest = mask.shape[-1]
    return lengths.long().cpu().numpy(), longest


def _collective_device(group) -> torch.device:
    """Where tensors of a collective on `group` must live: the CPU for gloo
    (also in a "cpu:gloo,cuda:nccl" group), the accelerator otherwise."""
    if "gloo" in str(dist.get_backend(group)):
        return torch.device("cpu")
    accelerator = torch.accelerator.current_accelerator()
    return torch.device("cpu") if accelerator is None else accelerator


def _all_reduce(values: list[int], op, group) -> list[int]:
    tensor = torch.tensor(values, dtype=torch.long, device=_collective_device(group))
    dist.all_reduce(tensor, op=op, group=group)
    return tensor.cpu().tolist()


def _plan_micro_batches(lengths: np.ndarray, cap: int, group_size: int, min_count: int, step: int,
                        balance_order: bool, sync_group) -> list[list[int]]:
    """Row indexes per micro-batch, planned by the engine (pack.h's
    verl_micro_batches), the count the same on every rank of sync_group: the
    ranks combine what each needs, then which of verl's splits fit, in two
    all-reduces between the engine's steps."""
    options = (lengths, cap, group_size, min_count, step)
    if sync_group is None:
        return _native_pack.verl_micro_batches(*options, balance_order, None, None)
    lower, longest, planned, groups = _native_pack.verl_micro_batch_needs(*options)
    lower, longest, planned, neg_groups = _all_reduce([lower, longest, planned, -groups], dist.ReduceOp.MAX, sync_group)
    agreed = (lower, longest, planned, -neg_groups)
    fits = _native_pack.verl_split_fits(*options, agreed)
    if fits:
        fits = _all_reduce(fits, dist.ReduceOp.MIN, sync_group)
    return _native_pack.verl_micro_batches(*options, balance_order, agreed, np.asarray(fits, dtype=np.int64))


def rearrange_micro_batches(
    batch,
    max_token_len,
    dp_group=None,
    num_batches_divided_by=None,
    same_micro_num_in_dp=True,
    min_num_micro_batch=None,
    use_dynamic_bsz_balance=True,
    force_group_size=1,
):
    """Split a TensorDict batch into micro-batches of at most max_token_len
    real tokens, balanced by calculate_workload.

    batch: a TensorDict with "input_ids" (nested: lengths from its offsets)
        or "attention_mask" (padded: lengths are its row sums; its width must
        not exceed max_token_len, as in verl).
    dp_group: with torch.distributed initialised and same_micro_num_in_dp,
        every rank of this group gets the same number of micro-batches.
    num_batches_divided_by: the count is a multiple of it (virtual pipeline).
    min_num_micro_batch: at least this many micro-batches.
    use_dynamic_bsz_balance: order micro-batches lightest at both ends,
        heaviest in the middle; otherwise as planned.
    force_group_size: runs of this many consecutive samples stay together.

    Returns (micro-batch TensorDicts, the batch's row indexes of each).
    """
    cap = _integer(max_token_len, "max_token_len", minimum=1)
    group_size = _integer(force_group_size, "force_group_size", minimum=1)
    step = 1 if num_batches_divided_by is None else _integer(num_batches_divided_by, "num_batches_divided_by", minimum=1)
    min_count = 0 if min_num_micro_batch is None else _integer(min_num_micro_batch, "min_num_micro_batch", minimum=0)
    lengths, longest = _effective_lengths(batch)
    _require(
        cap >= longest,
        f"max_token_len ({cap}) must be at least the sequence length of the batch ({longest})",
    )
    _require(lengths.size > 0, "batch is empty: there is nothing to split into micro-batches")
    _require(
        lengths.size % group_size == 0,
        f"batch size {lengths.size} must be a multiple of force_group_size ({group_size})",
    )
    synced = same_micro_num_in_dp and dp_group is not None and dist.is_available() and dist.is_initialized()
    batch_idx_list = _plan_micro_batches(
        lengths, cap, group_size, min_count, step, bool(use_dynamic_bsz_balance), dp_group if synced else None
    )
    return [_select_tensordict(batch, rows) for rows in batch_idx_list], batch_idx_list


def prepare_dynamic_batch(
    data,
    max_token_len: int,
    dp_group=None,
    num_batches_divided_by=None,
    same_micro_num_in_dp=True,
    min_num_micro_batch=None,
    use_dynamic_bsz_balance=True,
):
    """rearrange_micro_batches for a DataProto: micro-batch DataProtos (of
    data's own class) with their rows of the tensors and the non-tensor
    arrays, and a copy of meta_info each; and the row indexes of each."""
    _require(
        all(hasattr(data, name) for name in ("batch", "non_tensor_batch", "meta_info")),
        f"data must be a DataProto (with batch, non_tensor_batch and meta_info), got {type(data).__name__}",
    )
    _require(data.batch is not None, "data.batch is None: a DataProto without tensors has no lengths to split by")
    micro_batches, batch_idx_list = rearrange_micro_batches(
        data.batch,
        max_token_len=max_token_len,
        dp_group=dp_group,
        num_batches_divided_by=num_batches_divided_by,
        same_micro_num_in_dp=same_micro_num_in_dp,
        min_num_micro_batch=min_num_micro_batch,
        use_dynamic_bsz_balance=use_dynamic_bsz_balance,
    )
    out = []
    for micro_batch, rows in zip(micro_batches, batch_idx_list):
        non_tensors = {key: value[rows] for key, value in data.non_tensor_batch.items()}
        out.append(type(data).from_dict(dict(micro_batch), non_tensors, meta_info=copy.deepcopy(data.meta_info)))
    return out, batch_idx_list

# verl.trainer.ppo.v1.replay_buffer's classes, on the engine (verl_replay_buffer.py).
from seqflow.compat.verl_replay_buffer import ReplayBuffer, ReplayBufferAsync  # noqa: E402,F401
# verl.trainer.ppo.v1.trainer_base's _reissue_inflight_prompts, in one controller call (verl_trainer.py).
from seqflow.compat.verl_trainer import reissue_inflight_prompts  # noqa: E402,F401
