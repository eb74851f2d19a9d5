"""The model each DP rank trains: a small causal transformer on CPU torch.

A micro-batch is packed: its sequences back to back, attention inside each
sequence (causal), the other layers over all its tokens, as a varlen
attention kernel treats a pack. A sequence's cost then grows with L (the
MLP, the projections) and with L^2 (attention), as on real hardware."""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

VOCAB = 256
WIDTH = 64
HEADS = 2
LAYERS = 1


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.out = nn.Linear(WIDTH, WIDTH)
        self.norm2 = nn.LayerNorm(WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

    def attention(self, x: torch.Tensor, bounds: list[int]) -> torch.Tensor:
        tokens = x.shape[0]
        q, k, v = self.qkv(x).view(tokens, 3, HEADS, WIDTH // HEADS).permute(1, 2, 0, 3)
        outputs = [F.scaled_dot_product_attention(q[:, a:b], k[:, a:b], v[:, a:b], is_causal=True)
                   for a, b in zip(bounds[:-1], bounds[1:])]
        return self.out(torch.cat(outputs, dim=1).transpose(0, 1).reshape(tokens, WIDTH))

    def forward(self, x: torch.Tensor, bounds: list[int]) -> torch.Tensor:
        x = x + self.attention(self.norm1(x), bounds)
        return x + self.mlp(self.norm2(x))


class TinyCausalLM(nn.Module):
    def __init__(self, max_length: int, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.position = nn.Embedding(max_length, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def loss(self, sequences: list[np.ndarray]) -> torch.Tensor:
        """Mean next-token cross entropy over the packed sequences."""
        lengths = [len(s) for s in sequences]
        bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
        ids = torch.from_numpy(np.concatenate(sequences) % VOCAB)
        positions = torch.from_numpy(np.concatenate([np.arange(n) for n in lengths]))
        x = self.embed(ids) + self.position(positions)
        for block in self.blocks:
            x = block(x, bounds)
        targets = ids.roll(-1)
        targets[torch.tensor(bounds[1:]) - 1] = -100  # a sequence's last token predicts nothing
        return F.cross_entropy(self.head(self.norm(x)), targets, ignore_index=-100)


def train_seconds(model: TinyCausalLM, sequences: list[np.ndarray]) -> float:
    """Forward and backward of one packed micro-batch; the seconds it took
    (the thread's CPU time: what a core of its own would take, steady while
    other processes share the machine)."""
    start = time.thread_time()
    model.loss(sequences).backward()
    return time.thread_time() - start
