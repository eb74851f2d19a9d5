"""Checks of the arguments of seqflow's public calls, made before any engine
call (python/bindings/checks.cc: the messages, the name rule, the bounds)."""

from seqflow import _seqflow

globals().update({name: value for name, value in vars(_seqflow.checks).items() if not name.startswith("_")})
