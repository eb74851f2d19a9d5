"""seqflow: balanced data flow for LLM reinforcement-learning post-training."""

from seqflow import balance
from seqflow import pack

__version__ = "0.1.0"
__all__ = ["balance", "__version__"]
