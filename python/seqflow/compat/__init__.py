"""Other systems' names on top of seqflow, so their users switch without
rewriting code.

- ``install_as_transfer_queue()``: ``import transfer_queue`` (and its public
  submodules) then resolves to seqflow, with TransferQueue 0.1.11's
  functions, classes and semantics (``seqflow.compat.transfer_queue``).
- ``seqflow.compat.verl``: verl 0.9.1's ``seqlen_balancing`` functions.
"""

from __future__ import annotations

import os
import sys

from seqflow.compat._module_alias import ModuleAlias

_TRANSFER_QUEUE = ModuleAlias("transfer_queue", "seqflow.compat.transfer_queue")
# Inherited by processes started later (Ray workers, spawned children), where
# seqflow's startup hook (seqflow_as_transfer_queue.pth) installs it again.
INHERITED_ENV = "SEQFLOW_AS_TRANSFER_QUEUE"


def install_as_transfer_queue() -> None:
    """Makes ``import transfer_queue`` and ``import transfer_queue.<module>``
    give seqflow's TransferQueue-compatible modules, in the style of
    ``pymysql.install_as_MySQLdb()``. Call it once, before the program (or a
    library such as verl) imports transfer_queue; calling it again does
    nothing. A transfer_queue imported before the call is replaced for later
    imports. Processes this one starts afterwards (spawned children, the
    workers of a Ray instance it starts) get the same: a Ray cluster started
    elsewhere needs ``runtime_env={"env_vars": {"SEQFLOW_AS_TRANSFER_QUEUE":
    "1"}}``."""
    _TRANSFER_QUEUE.install(sys.meta_path, sys.modules)
    os.environ[INHERITED_ENV] = "1"


__all__ = ["install_as_transfer_queue"]
