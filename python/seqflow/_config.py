"""Reading TransferQueue-style configs (dicts or OmegaConf configs):
read_config, config_get and MAX_BUSY_POLL_US (python/bindings/config_reading.cc)."""

from seqflow._seqflow.config import MAX_BUSY_POLL_US, config_get, read_config

__all__ = ["MAX_BUSY_POLL_US", "config_get", "read_config"]
