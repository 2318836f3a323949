"""Policy objectives of LongCat-Flash-Thinking (§3.2.1) and Kimi k1.5 (§2), in plain torch.

Notation (LongCat §3.2.1), per response token t, all tensors of shape (responses, tokens):
``log_prob`` = log π_θ, ``old_log_prob`` = log π_old (behaviour policy, training engine),
``advantages`` = A, ``mask`` = response mask, ``tis_weights`` = min(exp(old − rollout), C)
(the truncated importance-sampling factor, no gradient).

LongCat, equation 4 (maximised; the functions below return the *loss*, its negative)::

    J = 1/(G·T_max) Σ_i Σ_t  w_t · max( min(r_t·A, clip(r_t, 1−ε_nl, 1+ε_ph)·A), ε_nh·A )
                                          [the outer max only where A < 0: dual clip]

Kimi k1.5 policy mirror descent (§2.3.2), per sample j of a prompt, with τ·log Z ≈ r̄::

    loss_j = −(r_j − r̄)·log π_θ(y_j) + τ/2 · (log π_θ(y_j) − log π_i(y_j))²

No framework import: verl adapters live in ``verl_losses.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

#: The policy log-ratio is clamped to ±LOG_RATIO_BOUND before exp, as verl's vanilla loss
#: does (numerical safety; it changes the loss by at most e^-20·|A| per token).
LOG_RATIO_BOUND = 20.0


def clamped_log_ratio(log_prob: torch.Tensor, old_log_prob: torch.Tensor) -> torch.Tensor:
    """log π_θ − log π_old, clamped to ±LOG_RATIO_BOUND."""
    return torch.clamp(log_prob - old_log_prob, -LOG_RATIO_BOUND, LOG_RATIO_BOUND)


def policy_ratio(log_prob: torch.Tensor, old_log_prob: torch.Tensor) -> torch.Tensor:
    """r(θ) = exp(log π_θ − log π_old), log-ratio clamped to ±LOG_RATIO_BOUND."""
    return torch.exp(clamped_log_ratio(log_prob, old_log_prob))


def longcat_token_loss(
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    eps_neg_low: float,
    eps_pos_high: float,
    eps_neg_high: float,
    tis_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-token loss −w·max(min(r·A, clip(r)·A), ε_nh·A) (outer max where A < 0);
    ``ratio`` = :func:`policy_ratio` (the gradient flows through it)."""
    surrogate = torch.minimum(ratio * advantages, torch.clamp(ratio, 1 - eps_neg_low, 1 + eps_pos_high) * advantages)
    floored = torch.where(advantages < 0, torch.maximum(surrogate, eps_neg_high * advantages), surrogate)
    loss = -floored
    if tis_weights is not None:
        loss = loss * tis_weights.detach()
    return loss


def mean_over_global_constant(
    token_loss: torch.Tensor, mask: torch.Tensor, num_responses: int, t_max: float
) -> torch.Tensor:
    """Σ_i Σ_t loss / (G·T_max): the constant denominator ("Dr. GRPO"), masked rows included in G."""
    return torch.where(mask.bool(), token_loss, 0.0).sum() / (num_responses * t_max)


@dataclass(frozen=True)
class ClipRegions:
    """Fractions of valid tokens in each clipping region (they are disjoint).

    ``low``: A < 0 and r < 1−ε_nl (lower clip active); ``high``: A > 0 and r > 1+ε_ph
    (clip-higher bound active); ``dual_floor``: A < 0 and r > ε_nh (the ε_nh·A floor active).
    In each region the token's gradient is zero. ``low + high`` is what verl reports as
    ``pg_clipfrac`` and ``dual_floor`` its ``pg_clipfrac_lower``.
    """

    low: float
    high: float
    dual_floor: float


@torch.no_grad()
def clip_regions(
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_neg_low: float,
    eps_pos_high: float,
    eps_neg_high: float,
) -> ClipRegions:
    valid = mask.bool()
    count = max(int(valid.sum()), 1)
    negative, positive = valid & (advantages < 0), valid & (advantages > 0)

    def fraction(region: torch.Tensor) -> float:
        return int(region.sum()) / count

    return ClipRegions(
        low=fraction(negative & (ratio < 1 - eps_neg_low)),
        high=fraction(positive & (ratio > 1 + eps_pos_high)),
        dual_floor=fraction(negative & (ratio > eps_neg_high)),
    )


@dataclass(frozen=True)
class TruncationStats:
    """Over valid tokens: the fraction of TIS weights at the cap C, and their mean."""

    capped_fraction: float
    mean_weight: float


@torch.no_grad()
def tis_truncation(tis_weights: torch.Tensor, mask: torch.Tensor, tis_cap: float) -> TruncationStats:
    valid = mask.bool()
    count = max(int(valid.sum()), 1)
    capped = valid & (tis_weights >= tis_cap * (1 - 1e-6))
    return TruncationStats(
        capped_fraction=int(capped.sum()) / count, mean_weight=torch.where(valid, tis_weights, 0.0).sum().item() / count
    )


def kimi_mirror_descent_token_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    tau: float,
    level: str = "sequence",
) -> torch.Tensor:
    """Per-token terms whose sum over a response's tokens is Kimi's per-sample loss.

    ``advantages`` must be r_j − r̄ (GRPO without std normalisation), broadcast over tokens.
    ``level="sequence"``: log π(y) = Σ_t log π(y_t), so the penalty is τ/2·(Σ_t Δ_t)²,
    spread over tokens as τ/2·Δ_t·S (S = Σ_t Δ_t) — same sum, same gradient τ·S·∇S.
    ``level="token"``: τ/2·Σ_t Δ_t², a per-token trust region.
    """
    delta = torch.where(mask.bool(), log_prob - old_log_prob, 0.0)
    policy_gradient = -advantages * log_prob
    if level == "sequence":
        penalty = 0.5 * tau * delta * delta.sum(dim=-1, keepdim=True)
    elif level == "token":
        penalty = 0.5 * tau * delta.square()
    else:
        raise ValueError(f"level must be 'sequence' or 'token', got {level!r}")
    return policy_gradient + penalty
