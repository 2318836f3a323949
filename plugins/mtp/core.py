"""Multi-token prediction (MiMo §2.2, after DeepSeek-V3 §2.2): framework-free torch.

Depth k = 1..D predicts token i+k+1 at position i:

    h'_i^k   = W_k [RMSNorm(h_i^{k-1}) ; RMSNorm(Emb(t_{i+k}))]        (2H → H, no bias)
    h^k      = Block_k(h'^k)                                           (one decoder block, causal)
    P^k_i    = softmax(Head(RMSNorm_k(h^k_i)))                          (the main model's head, shared)
    L^k      = CE(P^k_i, t_{i+k+1}) over the positions that have that token
    L        = L_main + λ · (1/D) Σ_k L^k

h^0 is the main model's last hidden state (before its final norm), Emb and Head are the main
model's own (shared). ``block`` is any decoder block taking ``(hidden, **block_kwargs)`` — the
host model's layer class (Qwen2 / Llama / MiMo decoder layers, see the adapters).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        return (self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))).to(dtype)


class MTPLayer(nn.Module):
    """One depth, with MiMo's checkpoint names: ``token_layernorm``, ``hidden_layernorm``,
    ``input_proj``, ``final_layernorm`` and the decoder block's own modules (``self_attn``,
    ``mlp``, ``input_layernorm``, ...) at the same level, as in ``model.mtp_layers.{k}.*``.
    The block keeps working as one module; its children are shared, not copied."""

    def __init__(self, hidden_size: int, block: nn.Module, eps: float = 1e-6):
        super().__init__()
        if list(block.parameters(recurse=False)):
            raise ValueError("the decoder block must keep its parameters in submodules")
        self.token_layernorm = RMSNorm(hidden_size, eps)
        self.hidden_layernorm = RMSNorm(hidden_size, eps)
        self.input_proj = nn.Linear(2 * hidden_size, hidden_size, bias=False)
        self.final_layernorm = RMSNorm(hidden_size, eps)
        for name, child in block.named_children():
            self.add_module(name, child)
        self.__dict__["block"] = block  # not registered: its parameters are already ours

    def forward(self, previous: torch.Tensor, next_token_embeddings: torch.Tensor, **block_kwargs) -> torch.Tensor:
        combined = self.input_proj(
            torch.cat([self.hidden_layernorm(previous), self.token_layernorm(next_token_embeddings)], dim=-1)
        )
        output = self.block(combined, **block_kwargs)
        return output[0] if isinstance(output, tuple) else output


@dataclass
class MTPOutput:
    losses: list[torch.Tensor]  # per depth: mean CE over its valid positions
    logits: list[torch.Tensor]  # per depth: [batch, T, vocab]; position i predicts t_{i+k+1}


@dataclass
class MTPTokenLosses:
    """Per depth, per position: CE of predicting t_{i+k+1} at i, and whether that target exists
    in position i's own sequence (and counts). Reduced by the caller (mean, or a trainer's own
    normalisation)."""

    per_token: list[torch.Tensor]  # [batch, T] float32
    valid: list[torch.Tensor]  # [batch, T] bool
    logits: list[torch.Tensor]

    def means(self) -> list[torch.Tensor]:
        return [(ce * ok).sum() / ok.sum().clamp_min(1) for ce, ok in zip(self.per_token, self.valid)]


def mtp_token_losses(
    layers: nn.ModuleList,
    main_hidden: torch.Tensor,
    input_ids: torch.Tensor,
    embed: nn.Module,
    head: nn.Module,
    loss_mask: torch.Tensor | None = None,
    sequence_positions: torch.Tensor | None = None,
    **block_kwargs,
) -> MTPTokenLosses:
    """Run the chained depths on a full sequence. Positions past the end (no token i+k or
    i+k+1) are computed but masked out; under causal attention they do not affect earlier
    positions, so this equals running each depth on the truncated sequence. ``loss_mask`` marks
    the target tokens that count. ``sequence_positions`` (the position ids of packed rows, which
    restart at 0 for each sequence) additionally masks targets that lie in the next sequence."""
    batch, length = input_ids.shape
    previous, out = main_hidden, MTPTokenLosses([], [], [])
    positions = torch.arange(length, device=input_ids.device)
    for depth, layer in enumerate(layers, start=1):
        shifted = torch.roll(input_ids, shifts=-depth, dims=1)  # t_{i+k}
        hidden = layer(previous, embed(shifted), **block_kwargs)
        logits = head(layer.final_layernorm(hidden))
        targets = torch.roll(input_ids, shifts=-(depth + 1), dims=1)  # t_{i+k+1}
        valid = (positions < length - depth - 1).expand(batch, length)
        if loss_mask is not None:
            valid = valid & torch.roll(loss_mask.bool(), shifts=-(depth + 1), dims=1)
        if sequence_positions is not None:
            valid = valid & (
                torch.roll(sequence_positions, shifts=-(depth + 1), dims=1) == sequence_positions + depth + 1
            )
        out.per_token.append(
            nn.functional.cross_entropy(
                logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none"
            ).reshape(batch, length)
        )
        out.valid.append(valid)
        out.logits.append(logits)
        previous = hidden
    return out


def mtp_forward(
    layers: nn.ModuleList,
    main_hidden: torch.Tensor,
    input_ids: torch.Tensor,
    embed: nn.Module,
    head: nn.Module,
    loss_mask: torch.Tensor | None = None,
    sequence_positions: torch.Tensor | None = None,
    **block_kwargs,
) -> MTPOutput:
    """Per-depth mean losses L^k and logits (``mtp_token_losses`` reduced by the mean)."""
    tokens = mtp_token_losses(
        layers, main_hidden, input_ids, embed, head, loss_mask, sequence_positions, **block_kwargs
    )
    return MTPOutput(tokens.means(), tokens.logits)


def total_loss(main_loss: torch.Tensor, mtp_losses: list[torch.Tensor], weight: float) -> torch.Tensor:
    """L_main + λ · mean over depths of the MTP losses."""
    if weight < 0:
        raise ValueError(f"MTP loss weight must be >= 0, got {weight}")
    if not mtp_losses:
        return main_loss
    return main_loss + weight * torch.stack(mtp_losses).mean()


@dataclass(frozen=True)
class WeightSchedule:
    """MiMo: λ = 0.3 for the first part of pre-training, then 0.1. ``switch_at`` counts steps
    (or tokens: whatever the caller passes to ``at``)."""

    initial: float = 0.3
    later: float = 0.1
    switch_at: int = 0  # 0: ``later`` never applies

    def __post_init__(self) -> None:
        if self.initial < 0 or self.later < 0:
            raise ValueError(f"MTP loss weights must be >= 0, got initial={self.initial}, later={self.later}")

    def at(self, progress: int) -> float:
        return self.later if self.switch_at and progress >= self.switch_at else self.initial
