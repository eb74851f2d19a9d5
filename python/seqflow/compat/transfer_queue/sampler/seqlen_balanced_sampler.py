"""``transfer_queue.sampler.seqlen_balanced_sampler``: seqflow's
SeqlenBalancedSampler, and the Karmarkar-Karp functions with TransferQueue's
results and its AssertionError on bad input."""

from __future__ import annotations

import functools

from seqflow import balance
from seqflow.samplers import SeqlenBalancedSampler


def _asserting(function):
    """seqflow raises ValueError naming the parameter; TransferQueue's
    functions fail an assertion, and programs may catch AssertionError."""

    @functools.wraps(function)
    def checked(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except ValueError as error:
            raise AssertionError(str(error)) from error

    return checked


karmarkar_karp = _asserting(balance.karmarkar_karp)
get_seqlen_balanced_partitions = _asserting(balance.get_seqlen_balanced_partitions)

__all__ = ["SeqlenBalancedSampler", "karmarkar_karp", "get_seqlen_balanced_partitions"]
