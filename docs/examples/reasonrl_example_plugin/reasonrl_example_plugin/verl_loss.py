"""verl adapter: registers the core loss as verl policy-loss mode ``example_reinforce``.

Called with verl's standard policy-loss arguments; aggregation is verl's own ``agg_loss``,
so every ``loss_agg_mode`` works unchanged.
"""

from __future__ import annotations

from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY, agg_loss, register_policy_loss

from reasonrl_example_plugin.core import reinforce_token_loss

LOSS_NAME = "example_reinforce"


def example_reinforce_loss(
    old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean", config=None, rollout_is_weights=None
):
    token_loss = reinforce_token_loss(log_prob, advantages, rollout_is_weights)
    # verl's actor fills global_batch_info (dp size, global token/sequence counts, scale).
    batch_info = dict(getattr(config, "global_batch_info", None) or {})
    loss = agg_loss(loss_mat=token_loss, loss_mask=response_mask, loss_agg_mode=loss_agg_mode, **batch_info)
    mask = response_mask.bool()
    metrics = {"actor/example_reinforce_mean_advantage": advantages[mask].mean().item() if mask.any() else 0.0}
    return loss, metrics


def register() -> None:
    if POLICY_LOSS_REGISTRY.get(LOSS_NAME) is not example_reinforce_loss:
        register_policy_loss(LOSS_NAME)(example_reinforce_loss)
