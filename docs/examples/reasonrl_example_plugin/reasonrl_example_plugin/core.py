"""Core math, framework-free: the REINFORCE token loss with truncated importance weights.

    loss_t = - w_t · A_t · log π_θ(o_t)        (w_t = rollout IS weight, no gradient; 1 if absent)

Plain torch; no verl import. Aggregation over tokens is left to the caller.
"""

from __future__ import annotations

import torch


def reinforce_token_loss(
    log_prob: torch.Tensor, advantages: torch.Tensor, is_weights: torch.Tensor | None = None
) -> torch.Tensor:
    """Per-token REINFORCE loss; ``is_weights`` are detached (they carry no gradient)."""
    loss = -advantages * log_prob
    if is_weights is not None:
        loss = loss * is_weights.detach()
    return loss
