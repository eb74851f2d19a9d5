"""The small causal transformer the training benchmark times.

Packed input: the tokens of several sequences back to back with their
`cu_seqlens` (0, then the end of each sequence), as seqflow.pack.materialize
builds them. Attention stays inside each sequence (a loop over the sequences,
causal within each), the way a varlen attention kernel treats a pack; the
other layers see the pack as one flat batch of tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class ModelConfig:
    vocab: int = 512
    width: int = 256
    heads: int = 4
    layers: int = 2
    max_length: int = 4096  # the longest sequence (learned positions)


class Block(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.heads = config.heads
        self.norm1 = nn.LayerNorm(config.width)
        self.qkv = nn.Linear(config.width, 3 * config.width)
        self.out = nn.Linear(config.width, config.width)
        self.norm2 = nn.LayerNorm(config.width)
        self.mlp = nn.Sequential(
            nn.Linear(config.width, 4 * config.width), nn.GELU(), nn.Linear(4 * config.width, config.width)
        )

    def attention(self, x: torch.Tensor, bounds: list[int]) -> torch.Tensor:
        tokens, width = x.shape
        q, k, v = self.qkv(x).view(tokens, 3, self.heads, width // self.heads).permute(1, 2, 0, 3)
        outputs = [
            F.scaled_dot_product_attention(q[:, start:end], k[:, start:end], v[:, start:end], is_causal=True)
            for start, end in zip(bounds[:-1], bounds[1:])
        ]
        return self.out(torch.cat(outputs, dim=1).transpose(0, 1).reshape(tokens, width))

    def forward(self, x: torch.Tensor, bounds: list[int]) -> torch.Tensor:
        x = x + self.attention(self.norm1(x), bounds)
        return x + self.mlp(self.norm2(x))


class CausalLM(nn.Module):
    def __init__(self, config: ModelConfig = ModelConfig(), seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.config = config
        self.embed = nn.Embedding(config.vocab, config.width)
        self.position = nn.Embedding(config.max_length, config.width)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = nn.LayerNorm(config.width)
        self.head = nn.Linear(config.width, config.vocab, bias=False)

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, cu_seqlens: torch.Tensor) -> torch.Tensor:
        """Logits [tokens, vocab] of a pack: input_ids and position_ids
        [tokens], cu_seqlens [sequences + 1]."""
        bounds = [int(b) for b in cu_seqlens.tolist()]
        x = self.embed(input_ids) + self.position(position_ids)
        for block in self.blocks:
            x = block(x, bounds)
        return self.head(self.norm(x))


def next_token_loss(logits: torch.Tensor, labels: torch.Tensor, cu_seqlens: torch.Tensor) -> torch.Tensor:
    """Mean cross entropy of predicting each token from the ones before it in
    its own sequence: the last token of a sequence predicts nothing."""
    targets = labels.roll(-1).clone()
    targets[cu_seqlens[1:].long() - 1] = -100
    return F.cross_entropy(logits, targets, ignore_index=-100)


def train_micro_batch(model: CausalLM, pack) -> None:
    """Forward and backward of one packed micro-batch (gradients accumulate,
    as over a rank's micro-batches before its optimizer step)."""
    logits = model(pack.input_ids, pack.position_ids, pack.cu_seqlens)
    next_token_loss(logits, pack.labels, pack.cu_seqlens).backward()
