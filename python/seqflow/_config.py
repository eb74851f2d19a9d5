"""Reading TransferQueue-style configs (dicts or OmegaConf configs):
read_config, config_get and MAX_BUSY_POLL_US (python/bindings/config_reading.cc)."""

from seqflow import _seqflow

globals().update({name: value for name, value in vars(_seqflow.config).items() if not name.startswith("_")})
