"""Other systems' names on top of seqflow, so their users switch without
rewriting code.

- ``install_as_transfer_queue()``: ``import transfer_queue`` (and its public
  submodules) then resolves to seqflow, with TransferQueue 0.1.11's
  functions, classes and semantics.
- ``seqflow.compat.verl``: verl 0.9.1's ``seqlen_balancing`` functions.
"""
