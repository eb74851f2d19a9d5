"""``transfer_queue.sampler.base``: seqflow's BaseSampler."""

from seqflow.samplers import BaseSampler

__all__ = ["BaseSampler"]
