"""verl adapters for the group step: a ``before_advantage`` callback of trainer mode
``reasonrl_sync`` and the ``masked_grpo`` advantage estimator.

The callback also logs the step's reward-side counters, read from ``reward_extra_info``:
``reward/math_timeouts`` and ``reward/math_failures`` (math answers scored 0 because grading
ran out of time or broke), ``reward/judge_errors``; which reward graded the responses
(``reward/math_graded``: Math-Verify verdicts, ``reward/code_judged``: programs the sandbox ran,
``reward/code_calibrated``: of those, scored by test difficulty, with
``reward/code_partial_credit`` between 0 and 1 and ``reward/code_score_mean``); the thinking
toggle's format reward (``reward/format_checked`` responses, ``reward/format_ok_frac``); the
seconds the reward manager spent scoring the step's responses (``reward/scoring_s``: each response's
latency, summed; responses are scored concurrently, so the sum can exceed the step's wall time).

The callback reads the step's ``uid``, ``rm_scores``, ``response_mask``, ``loss_mask`` and the
reward manager's ``reward_extra_info`` (``acc``, ``incomplete``) from verl's TransferQueue,
adds the length reward to ``rm_scores`` (at the token that carries the score) and zeroes both
masks of masked responses, then writes the fields back; verl then computes advantages from
them as usual. A zero ``loss_mask`` takes a response out of verl's loss (``agg_loss`` skips
fully masked sequences); ``masked_grpo`` takes it out of its group's mean and std: it is
verl's own ``compute_grpo_outcome_advantage`` run on the unmasked responses only.
"""

from __future__ import annotations

import numpy as np
import torch

from reasonrl.callbacks import StepCallback
from reasonrl.compat.verl import non_tensor_items
from reasonrl.plugins.rewards.config import RewardsConfig, settings_from
from reasonrl.plugins.rewards.group_step import group_adjustments

FETCHED = ["uid", "rm_scores", "response_mask", "loss_mask", "extra_fields"]
ESTIMATOR = "masked_grpo"


def _extra_infos(fields) -> list[dict]:
    return [
        (e or {}).get("reward_extra_info", {}) if isinstance(e, dict) else {}
        for e in non_tensor_items(fields["extra_fields"])
    ]


def reward_counts(extra: list[dict]) -> dict[str, float]:
    """The step's counters over its responses' ``reward_extra_info``."""

    def total(key: str) -> float:
        return float(sum(float(e.get(key, 0.0) or 0.0) > 0 for e in extra))

    math = [e for e in extra if e.get("task_kind") == "math"]
    code = [e for e in extra if e.get("task_kind") == "code"]
    calibrated = [e for e in code if e.get("code_level_pass")]
    code_scores = [float(e.get("task_score", 0.0)) for e in code]
    formats = [float(e["format_ok"]) for e in extra if float(e.get("format_ok", -1.0)) >= 0]
    return {
        "reward/math_timeouts": total("math_timeout"),
        "reward/math_failures": total("math_failed"),
        "reward/judge_errors": total("judge_error"),
        "reward/math_graded": float(sum(not e.get("math_timeout") and not e.get("math_failed") for e in math)),
        "reward/code_judged": total("code_judged"),
        "reward/code_calibrated": float(len(calibrated)),
        "reward/code_partial_credit": float(sum(0.0 < s < 1.0 for s in code_scores)),
        "reward/code_score_mean": float(np.mean(code_scores)) if code_scores else 0.0,
        "reward/format_checked": float(len(formats)),
        "reward/format_ok_frac": float(np.mean(formats)) if formats else 0.0,
        "reward/scoring_s": float(sum(float(e.get("scoring_s", 0.0)) for e in extra)),
    }


def _varied_groups(uids, lengths, masked) -> int:
    """Groups whose unmasked responses have more than one length (where the length reward is
    not all zero: its longest response gets −0.5 times the weight)."""
    seen: dict = {}
    for uid, length, off in zip(uids, lengths, masked):
        if not off:
            seen.setdefault(uid, set()).add(length)
    return sum(len(group) > 1 for group in seen.values())


def apply_group_step(fields, settings: RewardsConfig, step: int):
    """``fields``: the TensorDict verl's TransferQueue returns for FETCHED (jagged tensors per
    response). Returns (TensorDict of rm_scores/response_mask/loss_mask to write back, metrics)."""
    from tensordict import TensorDict

    uids = non_tensor_items(fields["uid"])
    extra = _extra_infos(fields)
    rm_scores = [t.clone() for t in fields["rm_scores"].unbind()]
    response_mask = [t.clone() for t in fields["response_mask"].unbind()]
    loss_mask = [t.clone() for t in fields["loss_mask"].unbind()]
    lengths = [int(m.sum()) for m in response_mask]
    correct = [float(e.get("acc", 0.0)) >= 1.0 for e in extra]
    incomplete = [float(e.get("incomplete", 0.0)) > 0 for e in extra]
    bonus, masked = group_adjustments(
        uids,
        lengths,
        correct,
        incomplete,
        step,
        settings.length_penalty_weight,
        settings.length_penalty_warmup_steps,
        settings.mask_incomplete,
    )
    for i in range(len(uids)):
        if bonus[i]:
            last = int(torch.nonzero(response_mask[i]).max()) if lengths[i] else rm_scores[i].numel() - 1
            rm_scores[i][last] += bonus[i]
        if masked[i]:
            response_mask[i].zero_()
            loss_mask[i].zero_()
    nested = lambda tensors: torch.nested.as_nested_tensor(tensors, layout=torch.jagged)  # noqa: E731
    out = TensorDict(
        {"rm_scores": nested(rm_scores), "response_mask": nested(response_mask), "loss_mask": nested(loss_mask)},
        batch_size=len(uids),
    )
    metrics = {
        "reasonrl/incomplete_mask_skipped": float(settings.mask_incomplete and bool(incomplete) and all(incomplete)),
        "reasonrl/incomplete": float(sum(incomplete)),
        "reasonrl/incomplete_masked": float(sum(masked)),
        "reasonrl/incomplete_masked_frac": sum(masked) / max(1, len(masked)),
        "reasonrl/length_penalty_mean": float(np.mean(bonus)) if bonus else 0.0,
        "reasonrl/length_penalty_nonzero": float(sum(b != 0.0 for b in bonus)),
        "reasonrl/length_varied_groups": float(_varied_groups(uids, lengths, masked)),
        **reward_counts(extra),
    }
    return out, metrics


class GroupStep(StepCallback):
    """``before_advantage`` callback: length penalty and masking on the step's TransferQueue
    fields when either is on; the reward counters always."""

    def __init__(self, settings: RewardsConfig):
        self.settings = settings

    def before_advantage(self, trainer, batch, metrics: dict) -> None:
        import transfer_queue as tq

        if not self.settings.needs_group_callback:
            fields = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
            metrics.update(reward_counts(_extra_infos(fields)))
            return
        fields = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=FETCHED)
        out, step_metrics = apply_group_step(fields, self.settings, int(trainer.global_steps))
        tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=out)
        metrics.update(step_metrics)


def build(config):
    """The callback when verl scores with reward manager ``reasonrl`` (its counters), else None."""
    from omegaconf import OmegaConf

    if OmegaConf.select(config, "reward.reward_manager.name", default=None) != "reasonrl":
        return None
    return GroupStep(settings_from(config))


def masked_grpo_advantage(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: np.ndarray, config=None, **_unused
):
    """verl's GRPO outcome advantage over the responses that have any unmasked token; 0 for the rest."""
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    norm_by_std = True if config is None else bool(config.get("norm_adv_by_std_in_grpo", True))
    keep = (response_mask.sum(dim=-1) > 0).cpu()
    advantages = torch.zeros_like(token_level_rewards)
    returns = torch.zeros_like(token_level_rewards)
    if keep.any():
        kept_index = np.asarray(index, dtype=object)[keep.numpy()]
        adv, ret = compute_grpo_outcome_advantage(
            token_level_rewards[keep], response_mask[keep], kept_index, norm_adv_by_std_in_grpo=norm_by_std
        )
        advantages[keep], returns[keep] = adv, ret
    return advantages, returns


def register_estimator() -> None:
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

    if ADV_ESTIMATOR_REGISTRY.get(ESTIMATOR) is not masked_grpo_advantage:
        register_adv_est(ESTIMATOR)(masked_grpo_advantage)
