"""The rules of a rank's stream of batches (seqflow/_stream_rules.py): which
batches a worker takes, when production is complete, what is left to consume,
the last fetch, why a stream stalls and when it checks."""

from __future__ import annotations

import numpy as np
import pytest

from seqflow import _stream_rules as rules


def test_a_worker_outside_its_count_is_refused():
    rules.check_worker_share(1, 3)
    for worker, workers in [(2, 2), (-1, 2), (0, 0), (True, 2)]:
        with pytest.raises(ValueError, match=r"worker must be in \[0, workers\)"):
            rules.check_worker_share(worker, workers)


def test_without_total_production_is_complete_when_every_sample_holds_every_field():
    assert rules.production_complete(np.array([True, True, True]), None)
    assert not rules.production_complete(np.array([True, False, True]), None)
    assert not rules.production_complete(np.array([], dtype=bool), None)  # no sample yet


def test_with_total_production_counts_produced_samples():
    produced = np.array([True, False, True, True])
    assert rules.production_complete(produced, 3)
    assert not rules.production_complete(produced, 4)


def test_left_to_consume_counts_produced_samples_the_task_has_not_consumed():
    assert rules.left_to_consume([10, 11, 12, 13], [True, True, False, True], [10, 12, 13], [True, True, False]) == 2
    with pytest.raises(ValueError, match="one flag per index, got 2 indexes and 1 produced flags"):
        rules.left_to_consume([0, 1], [True], [], [])


def test_the_last_fetch_asks_for_the_short_batch_unless_drop_last():
    tail = rules.fetch_after_production(3, False, 2)
    assert (tail.batch_size, tail.ends_if_empty) == (2, False)  # another rank may have taken them: ask again
    assert rules.fetch_after_production(3, False, 7).batch_size == 3
    done = rules.fetch_after_production(3, False, 0)
    assert (done.batch_size, done.ends_if_empty) == (3, True)
    dropped = rules.fetch_after_production(3, True, 2)
    assert (dropped.batch_size, dropped.ends_if_empty) == (3, True)


def test_a_stall_names_fields_no_sample_holds():
    produced = np.array([[True, False, False], [True, False, False]])
    assert rules.stall_reason(["input_ids", "rewrd", "mask"], produced, None) == (
        "no sample of the partition has field(s) 'rewrd', 'mask'; check the names against what the producers put")
    with pytest.raises(ValueError, match="2 fields but 3 flags"):
        rules.stall_reason(["a", "b"], produced, None)


def test_a_stall_names_samples_left_once_production_is_complete():
    produced = np.array([[True]])
    assert rules.stall_reason(["x"], produced, 5) == (
        "production is complete, but the sampler serves no batch of the 5 sample(s) left (with drop_last=True the "
        "stream ends without them)")
    assert rules.stall_reason(["x"], produced, 0) is None
    assert rules.stall_reason(["x"], produced, None) is None
    assert rules.stall_reason(["x"], None, 5) is None  # nothing put yet: producers may be slow
    assert rules.stall_reason(["x"], np.zeros((0, 1), dtype=bool), 5) is None


def test_the_stall_watch_checks_after_waiting_until_it_has_warned():
    now = [0.0]
    watch = rules.StallWatch(10.0, clock=lambda: now[0])

    def empty_fetch_at(t: float) -> bool:
        now[0] = t
        return watch.empty_fetch()

    assert not empty_fetch_at(0)
    assert not empty_fetch_at(9)
    assert empty_fetch_at(10)
    assert empty_fetch_at(11)  # checked, no reason found: checks again
    watch.batch_came()
    assert not empty_fetch_at(30)  # waiting starts anew
    assert empty_fetch_at(40)
    watch.warned()
    assert not empty_fetch_at(100)


def test_micro_batch_sizes_split_rows_as_evenly_as_chunk_sizes_does():
    assert rules.micro_batch_sizes(7, 3) == [3, 2, 2]
    assert rules.micro_batch_sizes(7, 10**30) == [7]
    assert rules.micro_batch_sizes(0, 3) == []
    for bad in (0, True, 1.5, None):
        with pytest.raises(ValueError, match=f"micro_batch_size must be an integer >= 1, got {bad!r}"):
            rules.micro_batch_sizes(7, bad)
