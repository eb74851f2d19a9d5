"""``transfer_queue.sampler.sequential_sampler``: seqflow's SequentialSampler."""

from seqflow.samplers import SequentialSampler

__all__ = ["SequentialSampler"]
