"""verl adapter: the rollout plugin's callback of trainer mode ``reasonrl_sync``.

``before_advantage``: reads each response's stop reason (``extra_fields[STOP_REASON_FIELD]``, put
there by agent loop ``reasonrl_rollout``), subtracts ``repetition_penalty`` from the reward of every
response vLLM stopped for repetition (at the token that carries the score, as verl's reward does)
and logs ``reasonrl/rollout/repetition_stops``, ``.../repetition_rate`` and
``.../repetition_tokens`` (tokens the stopped responses hold: what they cost before the stop) and
``.../penalised_reward_drop`` (the step's total reward before minus after, read back from verl's
TransferQueue).
"""

from __future__ import annotations

from typing import Any

from reasonrl.plugins.rollout.config import REPETITION, STOP_REASON_FIELD, RolloutConfig
from reasonrl.plugins.rollout.repetition import penalised

FETCHED = ["rm_scores", "response_mask", "extra_fields"]


def _items(value) -> list:
    value = value.tolist() if hasattr(value, "tolist") else list(value)
    return [getattr(v, "data", v) for v in value]


def stop_reasons(extra_fields: list) -> list[str | None]:
    return [(e or {}).get(STOP_REASON_FIELD) if isinstance(e, dict) else None for e in extra_fields]


def apply_repetition_penalty(fields, penalty: float):
    """``fields``: the step's FETCHED TensorDict (jagged per response). Returns (rm_scores to
    write back or None when nothing changed, metrics)."""
    import torch

    reasons = stop_reasons(_items(fields["extra_fields"]))
    stopped = [reason == REPETITION for reason in reasons]
    masks = list(fields["response_mask"].unbind())
    metrics = {
        "reasonrl/rollout/repetition_stops": float(sum(stopped)),
        "reasonrl/rollout/repetition_rate": sum(stopped) / max(1, len(stopped)),
        "reasonrl/rollout/repetition_tokens": float(sum(int(m.sum()) for m, s in zip(masks, stopped) if s)),
        "reasonrl/rollout/stop_reason_known": float(sum(r is not None for r in reasons)),
        "reasonrl/rollout/responses": float(len(reasons)),
    }
    if penalty == 0 or not any(stopped):
        return None, metrics
    scores = [t.clone() for t in fields["rm_scores"].unbind()]
    totals = [float(t.sum()) for t in scores]
    for i, (before, after) in enumerate(zip(totals, penalised(totals, stopped, penalty))):
        if after != before:
            nonzero = torch.nonzero(masks[i])
            last = int(nonzero.max()) if len(nonzero) else scores[i].numel() - 1
            scores[i][last] += after - before
    return torch.nested.as_nested_tensor(scores, layout=torch.jagged), metrics


class RolloutCallback:
    def __init__(self, settings: RolloutConfig) -> None:
        self.settings = settings

    def before_advantage(self, trainer, batch, metrics: dict) -> None:
        import transfer_queue as tq
        from tensordict import TensorDict

        fields = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=FETCHED)
        scores, step_metrics = apply_repetition_penalty(fields, self.settings.repetition_penalty)
        drop = 0.0
        if scores is not None:
            out = TensorDict({"rm_scores": scores}, batch_size=len(batch.keys))
            tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=out)
            # read back what verl's advantage will see: the total reward the penalty removed
            after = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["rm_scores"])
            drop = float(sum(float(t.sum()) for t in fields["rm_scores"].unbind())) - float(
                sum(float(t.sum()) for t in after["rm_scores"].unbind())
            )
        step_metrics["reasonrl/rollout/penalised_reward_drop"] = drop
        metrics.update(step_metrics)


def build(config: Any) -> RolloutCallback | None:
    """The callback when repeat detection is on."""
    from reasonrl.plugins.rollout.config import settings_from

    settings = settings_from(config)
    if not settings.repetition_detection:
        return None
    return RolloutCallback(settings)
