"""The plan and partition objects are the C++ ones: read-only, picklable."""

import pickle

import numpy as np
import pytest

from seqflow import balance, pack


def small_plan():
    return pack.plan([5, 3, 7, 2, 9, 4], dp_size=2, optimizer_steps=1, pack_max_length=16, pad_chunk=4)


def test_plan_objects_survive_pickling():
    p = small_plan()
    q = pickle.loads(pickle.dumps(p))
    assert isinstance(q, pack.PackPlan) and q.to_dict() == p.to_dict() and repr(q) == repr(p)
    assert q.lengths.tolist() == p.lengths.tolist()
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(p.stats)).tokens, p.stats.tokens)
    m = pack.micro_batches([51, 51, 51, 51, 10], 100, count_multiple=2)
    n = pickle.loads(pickle.dumps(m))
    assert (n.batches, n.tokens, n.workloads, n.empty_batches) == (m.batches, m.tokens, m.workloads, m.empty_batches)
    (seq,) = pack.materialize(p, [np.arange(n) for n in [5, 3, 7, 2, 9, 4]], rank=0, step=0)
    again = pickle.loads(pickle.dumps(seq))
    assert again.samples == seq.samples and again.cu_seqlens.tolist() == seq.cu_seqlens.tolist()
    part = balance.partition([5, 3, 2, 7], 2)
    back = pickle.loads(pickle.dumps(part))
    assert repr(back) == repr(part) and [x.tolist() for x in back.parts] == [x.tolist() for x in part.parts]


def test_properties_are_read_only_views():
    p = small_plan()
    with pytest.raises(AttributeError):
        p.dp_size = 3
    with pytest.raises(ValueError):
        p.lengths[0] = 1  # a view of the plan's own lengths
    stats = p.stats
    del p
    assert stats.tokens.sum() == 30  # the stats keep the plan alive
    part = balance.partition([5, 3, 2, 7], 2)
    with pytest.raises(ValueError):
        part.sums[0] = 0


def test_materialized_arrays_belong_to_the_caller():
    p = small_plan()
    (seq,) = pack.materialize(p, [np.arange(n) for n in [5, 3, 7, 2, 9, 4]], rank=1, step=0, pad_id=-1)
    seq.input_ids[0] = 99  # writable, as arrays handed to a training step are
    assert seq.input_ids[-1] == -1 and seq.position_ids.dtype == np.int64


def test_a_tampered_plan_is_refused_by_materialize():
    p = small_plan()
    state = list(p.__getstate__())
    state[0] = [5, 3]  # lengths of two samples, while the packs name six
    bad = pack.PackPlan.__new__(pack.PackPlan)
    bad.__setstate__(tuple(state))
    with pytest.raises(ValueError, match="token_ids has 6 samples but the plan has 2"):
        pack.materialize(bad, [np.arange(n) for n in [5, 3, 7, 2, 9, 4]])
    with pytest.raises(ValueError, match="sample"):
        pack.materialize(bad, [np.arange(5), np.arange(3)])
