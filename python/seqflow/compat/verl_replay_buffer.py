"""verl 0.9.1's V1 replay buffer (``verl.trainer.ppo.v1.replay_buffer``) on
seqflow's engine.

    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync

becomes

    from seqflow.compat.verl import ReplayBuffer, ReplayBufferAsync

with verl's constructors and ``sample(global_steps, partition_id,
batch_size) -> (KVBatchMeta, metrics)``, ``get_sampleable_count`` and
``wait_for_sampleable``. verl's loop lists every key of the partition every
``poll_interval`` (2 s) and decides in Python; here each pass is one call
into the controller (``Client.replay_pass``), which reads its own keys and
tags under its lock, evicts and selects there, and says how many prompts to
ask ``refill_fn`` for. Between passes with nothing to do the drop-in waits
for the partition's next change (``Client.watch``, pushed by the
controller), at most poll_interval, instead of sleeping.

DAPO filtering (``filter_groups_metric``) reads what verl reads, once per
newly finished group: ``rm_scores`` summed per trajectory for ``"reward"``,
``extra_fields["reward_extra_info"][metric]`` otherwise; the controller
tells which groups are new and decides as verl does (numpy's std of the
group's values is 0). ``group_filter_tag=`` reads a trajectory tag instead
(for rollouts that tag their reward), with no data read.

Exactly once: each pass carries its own pass id. A pass whose reply is lost
(TimeoutError, ConnectionError: the client timed out, the connection broke)
is sent again with the same id and gets the answer the controller kept (the
same groups, refill and metrics), and the drop-in acknowledges every kept
pass, which clears the selected prompt keys. A trainer that dies before the
acknowledgement leaves its selection held until the pass's lease (60 s)
ends; then those groups are sampleable again.

Per-rank balance (``balance_dp_size=``, a seqflow option): ``sample()``
answers its trajectories ordered rank by rank over that many DP ranks, as
verl's trainer reorders a sampled batch (``_balance_batch``: verl's
get_seqlen_balanced_partitions of verl's workload of each trajectory's
``seq_len`` tag, equal counts), balanced in the engine, with verl's
``global_seqlen/*`` metrics; a batch whose trajectories are not a multiple
of the ranks comes in arrival order, without those metrics (verl pads it).

Staleness by policy version (``max_staleness_versions=``, a seqflow option,
async only): as NeMo-RL's max_trajectory_age_steps, TRL's max_staleness and
AReaL's max_head_offpolicyness, a group whose trajectories started at
policy version ``start`` (``Client.set_policy_version``; the smallest start
among them) is stale when the current version - ``start`` exceeds it;
``max_off_policy_strategy`` drops it when it finishes or holds sampling
while it is in flight, as for verl's global_steps threshold (either makes a
group stale). Its evictions are reported as
``{prefix}/off_policy/version_evicted_samples`` and
``{prefix}/off_policy/version_evicted_samples_age/max``, only when nonzero.

Each member's lifecycle (``member_status=True``, a seqflow option): every
trajectory's own tag ``status`` takes part (pending / running / finished /
failed / aborted; absent: finished); a group is sampleable once no member is
pending or running, its failed and aborted trajectories are left out of the
batch and cleared (reported as
``{prefix}/rollout_failure/left_out_trajectories``, only when nonzero), and
a group whose trajectories all failed is a failed group. See docs/replay.md.

What differs, on purpose:
- Prompts of the same ``global_steps`` are served in their keys' arrival
  order (verl: a set's hash order, which varies between processes).
- A sync pass that would select groups with no trajectory raises before it
  discards the surplus (verl discards it, then raises).
- Bad options raise ValueError naming the parameter and the value (verl:
  AssertionError for the threshold and the strategy).
"""

from __future__ import annotations

import secrets
import time
from collections import defaultdict
from functools import partial
from typing import Any, Callable, Optional, TypeVar

from seqflow._checks import check_choice, check_count, check_instance, check_name
from seqflow._watch import Watch
from seqflow.batch_meta import KVBatchMeta
from seqflow.client import Client

# Seconds the controller keeps a pass's answer for a retry and holds its selection unacknowledged: at least
# this, and three of the client's timeouts, so that a reply lost after a whole timeout is still asked for again.
_PASS_LEASE = 60.0
_MOST_PASS_LEASE = 3600.0  # the controller's bound (an hour)
_RETRY_PAUSE = (0.05, 1.0)  # seconds between retries: first, most (doubling)
_Answer = TypeVar("_Answer")
DAPO_FILTERED_REWARD_COUNTS_KEY = "_dapo_filtered_reward_counts"
_CANONICAL_REWARD_METRIC = "reward"  # verl's FILTER_GROUPS_REWARD_METRIC: read rm_scores, not reward_extra_info


def _pass_lease(client: Client) -> float:
    return min(max(_PASS_LEASE, 3 * client.timeout), _MOST_PASS_LEASE)


def _retried(call: Callable[[], _Answer], client: Client) -> _Answer:
    """call() again while its reply is lost (TimeoutError, ConnectionError)
    and a retry, answered within the client's timeout, still finds the pass
    kept (its lease runs from the controller's first answer, after this
    starts); a kept pass answers a retry as it answered first."""
    deadline = time.monotonic() + _pass_lease(client)
    pause = _RETRY_PAUSE[0]
    while True:
        try:
            return call()
        except (TimeoutError, ConnectionError):
            if time.monotonic() + pause + client.timeout >= deadline:
                raise
            time.sleep(pause)  # a broken connection fails at once: do not spin on it
            pause = min(2 * pause, _RETRY_PAUSE[1])


def _default_client() -> Client:
    from seqflow.compat.transfer_queue import interface

    return interface._seqflow()


class ReplayBuffer:
    """verl's sync ReplayBuffer: on-policy sampling; DAPO evicts k and
    refills 2k within max_inflight_gen_batches x train_batch_size prompts in
    flight; failed groups stay sampleable unless sync_refill_failed_groups."""

    _MODE = "sync"

    def __init__(self, trainer_mode: str, trainer_config: Any, max_off_policy_threshold: Optional[int],
                 max_off_policy_strategy: str, sampler_kwargs: Any, poll_interval: float = 2.0,
                 refill_fn: Optional[Callable[[int], Any]] = None, filter_groups_metric: Optional[str] = None,
                 train_batch_size: Optional[int] = None, gen_batch_size: Optional[int] = None,
                 max_inflight_gen_batches: int = 1, sync_refill_failed_groups: bool = False, *,
                 group_filter_tag: Optional[str] = None, client: Optional[Client] = None,
                 balance_dp_size: Optional[int] = None, balance_length_tag: str = "seq_len",
                 max_staleness_versions: Optional[int] = None, member_status: bool = False):
        if max_off_policy_threshold is not None and (
                not isinstance(max_off_policy_threshold, int) or isinstance(max_off_policy_threshold, bool)
                or max_off_policy_threshold <= 0):
            raise ValueError(f"max_off_policy_threshold must be an integer greater than 0, or None to disable "
                             f"off-policy version control, got {max_off_policy_threshold!r}")
        check_choice(max_off_policy_strategy, "max_off_policy_strategy", ("drop", "wait"))
        if filter_groups_metric is not None and refill_fn is None:
            raise ValueError("Group filtering (filter_groups_metric) requires refill_fn to replace evicted groups")
        if sync_refill_failed_groups and refill_fn is None:
            raise ValueError("sync_refill_failed_groups requires refill_fn to replace failed groups")
        self.trainer_mode = trainer_mode
        self.trainer_config = trainer_config
        self.max_off_policy_threshold = max_off_policy_threshold
        self.max_off_policy_strategy = max_off_policy_strategy
        self.sampler_kwargs = sampler_kwargs
        self.poll_interval = poll_interval
        self.refill_fn = refill_fn
        self.filter_groups_metric = filter_groups_metric
        self.group_filter_tag = group_filter_tag
        self.train_batch_size = train_batch_size
        self.gen_batch_size = gen_batch_size
        self.max_inflight_gen_batches = max_inflight_gen_batches
        self.sync_refill_failed_groups = sync_refill_failed_groups
        self.balance_dp_size = None if balance_dp_size is None else check_count(balance_dp_size, "balance_dp_size",
                                                                                minimum=1)
        self.balance_length_tag = check_name(balance_length_tag, "balance_length_tag")
        self.max_staleness_versions = max_staleness_versions  # checked by the engine, which names it
        self.member_status = check_instance(member_status, "member_status", bool, "a bool")
        self._client = client
        self._group_values_owed: dict[str, dict[str, list[float]]] = {}  # by partition: for the next pass
        self._validate_mode_config()

    def _validate_mode_config(self) -> None:
        if self.filter_groups_metric is not None or self.group_filter_tag is not None:
            if (not isinstance(self.max_inflight_gen_batches, int) or isinstance(self.max_inflight_gen_batches, bool)
                    or self.max_inflight_gen_batches <= 0):
                raise ValueError(f"max_inflight_gen_batches must be a positive integer, "
                                 f"got {self.max_inflight_gen_batches!r}")
            if not isinstance(self.train_batch_size, int) or self.train_batch_size <= 0:
                raise ValueError(f"train_batch_size must be a positive integer with group filtering, "
                                 f"got {self.train_batch_size!r}")
        if self.sync_refill_failed_groups and self.gen_batch_size != 1:
            raise ValueError(f"sync_refill_failed_groups requires gen_batch_size=1, got {self.gen_batch_size!r}")

    def _client_now(self) -> Client:
        return self._client if self._client is not None else _default_client()

    def _pass(self, partition_id: str, global_steps: int, batch_size: int, step: str, cursor: Any,
              pass_id: Optional[int] = None) -> Any:
        """One pass. With filter_groups_metric, a count first names the groups finished since the last
        pass, whose values are read and carried by the pass (verl classifies every finished group of its
        listing before it evicts or selects); groups that finish in between are held in flight by the
        pass, and their values carried by the next."""
        filtering = self.group_filter_tag is not None or self.filter_groups_metric is not None
        metric = self.filter_groups_metric if self.group_filter_tag is None else None
        sync_filtering = self._MODE == "sync" and filtering
        client = self._client_now()

        def replay_pass(pass_step: str, pass_batch_size: int, group_values: dict[str, list[float]],
                        kept_id: Optional[int] = None) -> Any:
            return client.replay_pass(
                partition_id, global_steps, pass_batch_size, step=pass_step, mode=self._MODE,
                max_off_policy_threshold=self.max_off_policy_threshold,
                max_off_policy_strategy=self.max_off_policy_strategy, group_filter_tag=self.group_filter_tag,
                evict=partition_id != "val",
                refill_failed_groups=self._MODE == "sync" and self.sync_refill_failed_groups,
                max_inflight_prompts=self.max_inflight_gen_batches * self.train_batch_size if sync_filtering else 0,
                gen_batch_size=self.gen_batch_size or 1, group_filter_metric=metric, group_values=group_values,
                cursor=cursor, pass_id=kept_id, lease=_pass_lease(client),
                balance_ranks=(self.balance_dp_size or 0) if pass_step == "sample" else 0,
                balance_length_tag=self.balance_length_tag, max_staleness_versions=self.max_staleness_versions,
                member_status=self.member_status)

        values = self._group_values_owed.pop(partition_id, {})
        if metric is not None and partition_id != "val":
            probe = replay_pass("count", 0, values)
            if step == "count" and not probe.unclassified_keys:
                return probe
            values = self._group_values(client, partition_id, list(probe.unclassified_keys))
        answer = replay_pass(step, batch_size, values, pass_id)
        if answer.unclassified_keys:
            self._group_values_owed[partition_id] = self._group_values(client, partition_id,
                                                                       list(answer.unclassified_keys))
        return answer

    def _group_values(self, client: Client, partition_id: str, keys: list[str]) -> dict[str, list[float]]:
        """verl's DAPO metric of each trajectory (verl's _dapo_filtered_keys reads the same), by uid."""
        if not keys:
            return {}
        metric = self.filter_groups_metric
        field = "rm_scores" if metric == _CANONICAL_REWARD_METRIC else "extra_fields"
        data = client.kv_batch_get(keys, partition_id, select_fields=[field])
        values: dict[str, list[float]] = defaultdict(list)
        missing = set()
        for key, value in zip(keys, list(data[field]), strict=True):
            uid = key.split("_")[0]
            if field == "rm_scores":
                values[uid].append(float(value.sum().item()))
                continue
            extra_fields = getattr(value, "data", value)
            reward_extra_info = extra_fields.get("reward_extra_info", {}) if isinstance(extra_fields, dict) else {}
            if metric in reward_extra_info:
                values[uid].append(float(reward_extra_info[metric]))
            else:
                missing.add(uid)
        if missing:
            raise RuntimeError(f"Finished groups are missing DAPO metric {metric!r}: {sorted(missing)[:5]}")
        return values

    def _passes(self, partition_id: str, global_steps: int, batch_size: int, step: str) -> Any:
        """Passes until one is ready, asking refill_fn for what each says,
        each exactly once (see the module's docstring); after a pass with
        nothing to do, waits for the partition's next change (watched from
        before the first pass: none is missed)."""
        client = self._client_now()
        changes = _retried(partial(Watch, client, partition_id, None, None, None, 1024), client)
        cursor = None
        while True:
            pass_id = secrets.randbits(63) or 1
            one_pass = partial(self._pass, partition_id, global_steps, batch_size, step, cursor, pass_id)
            answer = _retried(one_pass, client)
            cursor = answer.cursor
            acknowledge = partial(self._client_now().ack_replay_pass, partition_id, pass_id)
            if answer.kept and not _retried(acknowledge, client):
                if answer.selected_uids:
                    continue  # its lease ended first: the groups went back, to be selected again
            if answer.refill > 0 and self.refill_fn is not None:
                self.refill_fn(answer.refill)
            if answer.ready:
                return answer
            if answer.refill == 0 and not answer.unclassified_keys:  # owed DAPO values go with the next pass
                _retried(partial(changes.next_changes, self.poll_interval), client)  # its cursor stays: nothing missed

    @staticmethod
    def _metrics(partition_id: str, cursor: Any) -> dict:
        prefix = "training" if partition_id == "train" else "validation"
        metrics: dict[str, Any] = {name: int(value) if name.endswith(("_samples", "_trajectories")) else value
                                   for name, value in cursor.metrics(prefix)}
        if cursor.filtered_values:
            metrics[DAPO_FILTERED_REWARD_COUNTS_KEY] = dict(cursor.filtered_values)
        return metrics

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[KVBatchMeta, dict]:
        """The batch_size oldest sampleable groups' trajectories (their prompt
        keys cleared) and verl's eviction metrics."""
        answer = self._passes(partition_id, global_steps, batch_size, "sample")
        metrics = self._metrics(partition_id, answer.cursor)
        if answer.rank_sizes:
            metrics.update(_seqlen_balance_metrics(answer))
        return KVBatchMeta(keys=list(answer.keys), tags=answer.tags, partition_id=partition_id), metrics


def _seqlen_balance_metrics(answer: Any, prefix: str = "global_seqlen") -> dict[str, Any]:
    """verl's log_seqlen_unbalance names, from the pass's per-rank sums (the
    batch was balanced in the engine, as verl's trainer balances it)."""
    before, after = list(answer.arrival_rank_lengths), list(answer.rank_lengths)
    return {f"{prefix}/min": min(before), f"{prefix}/max": max(before), f"{prefix}/minmax_diff": max(before) - min(before),
            f"{prefix}/balanced_min": min(after), f"{prefix}/balanced_max": max(after),
            f"{prefix}/mean": sum(before) / len(before)}


class ReplayBufferAsync(ReplayBuffer):
    """verl's ReplayBufferAsync: stale (drop), filtered and failed groups
    evicted and refilled k; ``wait`` holds sampling while an in-flight
    prompt is at the threshold."""

    _MODE = "async"

    def _validate_mode_config(self) -> None:
        pass

    def get_sampleable_count(self, global_steps: int, partition_id: str) -> int:
        """Terminal groups eligible for sampling now (nothing evicted)."""
        return self._pass(partition_id, global_steps, 0, "count", None).sampleable

    def wait_for_sampleable(self, global_steps: int, partition_id: str, target_count: int) -> tuple[set[str], dict]:
        """Passes (evicting and refilling) until target_count groups are
        sampleable; the sampleable uids and the eviction metrics."""
        answer = self._passes(partition_id, global_steps, target_count, "evict")
        return set(answer.sampleable_uids), self._metrics(partition_id, answer.cursor)
