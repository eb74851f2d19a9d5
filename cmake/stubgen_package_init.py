"""The `seqflow` package that nanobind's stubgen imports seqflow._seqflow from
at build time (CMakeLists.txt copies this file beside the built module as
its __init__.py); never installed.

The bindings give their classes the public module's name (Partition's
__module__ is "seqflow.balance", ...), and those modules re-export the classes
from seqflow._seqflow. stubgen would then write `from seqflow.balance import
Partition` into the stub of seqflow._seqflow.balance, an import that type
checkers follow back to that stub: no class definition anywhere. Here each
class gets back the name of the submodule that binds it, so that its stub
defines it, for this process only."""

import types

from seqflow import _seqflow


def _is_public_seqflow_module(name: str) -> bool:
    return (name == "seqflow" or name.startswith("seqflow.")) and not name.startswith("seqflow._seqflow")


for _module in [_seqflow, *(value for value in vars(_seqflow).values() if isinstance(value, types.ModuleType))]:
    for _value in vars(_module).values():
        if isinstance(_value, type) and _is_public_seqflow_module(_value.__module__):
            _value.__module__ = _module.__name__
