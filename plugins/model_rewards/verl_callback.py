"""verl adapter: the step's verdict and constraint counters, from ``reward_extra_info``.

A ``before_advantage`` callback (reasonrl's trainer modes) logs, per step, how the judged responses
were decided — ``model_rewards/judge_rule`` (Math-Verify said equal), ``judge_empty`` (no final
answer: 0, not asked), ``judge_model`` (the judge's
verdict), ``judge_cache`` (a repeated answer), ``judge_unparsed`` (no readable verdict),
``judge_timeout`` / ``judge_error`` (late / failed requests), ``judge_yes`` (of the judged, accepted) — and the instruction-following
responses checked and fully followed (``constraints_checked`` / ``constraints_followed``).
"""

from __future__ import annotations

from reasonrl.callbacks import StepCallback
from reasonrl.compat.verl import non_tensor_items
from reasonrl.plugins.model_rewards.config import FUNCTION, uses_our_reward_function
from reasonrl.plugins.model_rewards.verl_reward_fn import EXTRA_KEYS

__all__ = ["FUNCTION", "ModelRewardCounters", "build", "counts"]


def counts(extra: list[dict]) -> dict[str, float]:
    """``model_rewards/<key>``: the step's responses with that flag set."""
    return {f"model_rewards/{key}": float(sum(float(e.get(key) or 0.0) > 0 for e in extra)) for key in EXTRA_KEYS}


class ModelRewardCounters(StepCallback):
    def before_advantage(self, trainer, batch, metrics: dict, **kwargs) -> None:
        import transfer_queue as tq

        fields = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
        extra = [
            (e or {}).get("reward_extra_info", {}) if isinstance(e, dict) else {}
            for e in non_tensor_items(fields["extra_fields"])
        ]
        metrics.update(counts(extra))


def build(config):
    """The callback when verl's custom reward function is this plugin's, else None."""
    return ModelRewardCounters() if uses_our_reward_function(config) else None
