"""``transfer_queue.sampler.grpo_group_n_sampler``: seqflow's GRPOGroupNSampler."""

from seqflow.samplers import GRPOGroupNSampler

__all__ = ["GRPOGroupNSampler"]
