"""``transfer_queue.sampler.rank_aware_sampler``: seqflow's RankAwareSampler."""

from seqflow.samplers import RankAwareSampler

__all__ = ["RankAwareSampler"]
