"""seqflow demo: one GRPO pipeline in one process, on seqflow's embedded client.

    python -m seqflow demo [--steps 4] [--prompts 64] [--responses 8] [--ranks 8]
                           [--seed 0] [--report out/demo_report.json]

A rollout producer thread writes, per training step, ``prompts x responses``
samples with long-tailed lengths into one partition (``train@global_step_S``):
real variable-length ``input_ids`` tensors, with ``total_lengths`` and the
prompt's ``group_id`` in custom_meta. Two tasks read them through
``seqflow.StreamingDataset`` (finite mode, one partition per step) on
``ranks`` simulated DP ranks (one thread per rank and task), all through one
``SeqlenBalancedSampler``:

- ``log_prob`` reads ``input_ids`` in two global batches per step while the
  rollout is still being written, computes a stand-in ``old_log_prob`` per
  response token and writes it back (``put`` with the batch's metadata);
- ``update_actor`` needs ``input_ids`` and ``old_log_prob``, so it sees a
  sample only after log_prob wrote it back; it reads the step as one global
  batch.

Per step the demo prints the samples, the tokens per rank (min / max), their
max/mean against the max/mean SequentialSampler would have had on the same
data (each global batch cut into contiguous per-rank chunks in arrival order,
as SequentialSampler hands them out), an exactly-once check per task (every
sample of the step consumed exactly once across the ranks), and the pack plan
of the actor's batch (``seqflow.pack.plan``: DP ranks x optimizer steps x
packs under a token cap). It writes a JSON report and, when matplotlib is
installed, a PNG chart of the per-rank load.
"""

from __future__ import annotations

from seqflow.demo.pipeline import main, run

__all__ = ["main", "run"]
