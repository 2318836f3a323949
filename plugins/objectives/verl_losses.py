"""verl adapter: policy-loss modes ``longcat`` and ``kimi_mirror_descent``.

Both are registered in verl's own ``POLICY_LOSS_REGISTRY`` (``register_policy_loss``) and
called with verl's standard arguments by its actor, FSDP and Megatron engines alike
(``verl.workers.utils.losses.ppo_loss``). Aggregation is verl's ``agg_loss`` with the
actor's ``global_batch_info``, so ``loss_agg_mode`` / ``loss_scale_factor`` behave as for
verl's ``vanilla`` loss.

Contract of ``longcat`` (one verl config serves ``vanilla`` and ``longcat``): ε_nl =
``actor.clip_ratio_low``, ε_ph = ``actor.clip_ratio_high`` (or the scheduled value in
``policy_loss.eps_pos_high``), ε_nh = ``actor.clip_ratio_c``, the TIS factor = verl's
``rollout_is_weights`` (``algorithm.rollout_correction.rollout_is=token``, threshold C),
the G·T_max denominator = ``loss_agg_mode=seq-mean-token-sum-norm`` with
``loss_scale_factor=T_max``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch
from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY, agg_loss, register_policy_loss
from verl.utils.torch_functional import masked_mean
from verl.workers.config import PolicyLossConfig

from reasonrl.plugins.objectives import core
from reasonrl.plugins.objectives.compat import policy_loss_mutable_fields

LONGCAT = "longcat"
KIMI = "kimi_mirror_descent"


@dataclass
class ObjectivePolicyLossConfig(PolicyLossConfig):
    """verl's ``actor.policy_loss`` config plus the objectives plugin's hyper-parameters
    (selected with ``_target_``: verl refuses unknown keys in its own class).

    ``tis_cap`` (C) only labels the TIS metrics; the truncation itself is verl's rollout
    correction. ``eps_pos_high``, when set, overrides ``actor.clip_ratio_high`` for
    ``longcat``: the ε_pos_high schedule writes it each step.
    """

    _mutable_fields = policy_loss_mutable_fields() | {"eps_pos_high"}

    tis_cap: Optional[float] = None
    eps_pos_high: Optional[float] = None
    tau: float = 0.1
    kimi_level: str = "sequence"


def _clip_bounds(config: Any) -> tuple[float, float, float]:
    eps_neg_low = config.clip_ratio_low if config.clip_ratio_low is not None else config.clip_ratio
    eps_pos_high = config.clip_ratio_high if config.clip_ratio_high is not None else config.clip_ratio
    scheduled = getattr(config.policy_loss, "eps_pos_high", None)
    return eps_neg_low, scheduled if scheduled is not None else eps_pos_high, config.get("clip_ratio_c", 3.0)


def longcat_policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """LongCat equation 4 (``core.longcat_token_loss``) with verl's aggregation; verl's
    vanilla metrics plus the clip regions, TIS truncation and the ε_pos_high in force."""
    assert config is not None, "verl passes the actor config"
    eps_neg_low, eps_pos_high, eps_neg_high = _clip_bounds(config)
    log_ratio = core.clamped_log_ratio(log_prob, old_log_prob)
    ratio = torch.exp(log_ratio)
    token_loss = core.longcat_token_loss(ratio, advantages, eps_neg_low, eps_pos_high, eps_neg_high, rollout_is_weights)
    loss = agg_loss(
        loss_mat=token_loss, loss_mask=response_mask, loss_agg_mode=loss_agg_mode, **config.global_batch_info
    )

    mask = response_mask.bool()
    regions = core.clip_regions(ratio, advantages, mask, eps_neg_low, eps_pos_high, eps_neg_high)
    metrics = {
        # verl's vanilla names, same meaning
        "actor/pg_clipfrac": regions.low + regions.high,
        "actor/ppo_kl": masked_mean(-log_ratio.detach(), mask).item(),
        "actor/pg_clipfrac_lower": regions.dual_floor,
        # what vanilla does not report
        "actor/longcat/clipfrac_low": regions.low,
        "actor/longcat/clipfrac_high": regions.high,
        "actor/longcat/clipfrac_dual_floor": regions.dual_floor,
        "actor/longcat/eps_pos_high": float(eps_pos_high),
    }
    if rollout_is_weights is not None:
        tis_cap = getattr(config.policy_loss, "tis_cap", None)
        stats = core.tis_truncation(rollout_is_weights, mask, tis_cap if tis_cap is not None else float("inf"))
        metrics["actor/longcat/tis_mean"] = stats.mean_weight
        if tis_cap is not None:
            metrics["actor/longcat/tis_capped_frac"] = stats.capped_fraction
    return loss, metrics


def kimi_mirror_descent_policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "seq-mean-token-sum",
    config: Any = None,
    rollout_is_weights: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Kimi k1.5 policy mirror descent (``core.kimi_mirror_descent_token_loss``); the
    reference policy of the iteration π_i is verl's ``old_log_prob``."""
    assert config is not None, "verl passes the actor config"
    tau = float(getattr(config.policy_loss, "tau", 0.1))
    level = getattr(config.policy_loss, "kimi_level", "sequence")
    token_loss = core.kimi_mirror_descent_token_loss(log_prob, old_log_prob, advantages, response_mask, tau, level)
    if rollout_is_weights is not None:
        token_loss = token_loss * rollout_is_weights.detach()
    loss = agg_loss(
        loss_mat=token_loss, loss_mask=response_mask, loss_agg_mode=loss_agg_mode, **config.global_batch_info
    )
    mask = response_mask.bool()
    with torch.no_grad():
        sequence_log_ratio = torch.where(mask, log_prob - old_log_prob, 0.0).sum(dim=-1)
        rows = mask.any(dim=-1)
        mean_square = (sequence_log_ratio.square()[rows].mean() if rows.any() else torch.zeros(())).item()
    metrics = {
        "actor/ppo_kl": masked_mean(old_log_prob - log_prob, mask).item(),
        "actor/kimi/sequence_log_ratio_sq": mean_square,
        "actor/kimi/tau": tau,
    }
    return loss, metrics


LOSSES = {LONGCAT: longcat_policy_loss, KIMI: kimi_mirror_descent_policy_loss}


def register() -> None:
    """Put both losses in verl's registry (idempotent)."""
    for name, function in LOSSES.items():
        if POLICY_LOSS_REGISTRY.get(name) is not function:
            register_policy_loss(name)(function)


register()  # see reasonrl.bridges.import_hooks.register_adapter_when_loaded
