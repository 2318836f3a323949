"""verl adapter: the rollout plugin's callback of trainer mode ``reasonrl_sync``.

Repeat detection (``before_advantage``): reads each response's stop reason
(``extra_fields[STOP_REASON_FIELD]``, put there by the plugin's request transform in agent loop ``reasonrl``), subtracts
``repetition_penalty`` from the reward of every response vLLM stopped for repetition (at the token
that carries the score, as verl's reward does) and logs ``reasonrl/rollout/repetition_stops``,
``.../repetition_rate``, ``.../repetition_tokens`` (tokens the stopped responses hold: what they
cost before the stop) and ``.../penalised_reward_drop`` (the step's total reward before minus
after, read back from verl's TransferQueue).

Partial rollout (Kimi k1.5 §2.6.2; ``PartialRolloutCallback``): every training batch carries the
token budget; a finished group with an unfinished response is held back (``holds_group``: verl
refills its slot) into the checkpointed ``PartialRolloutStore``; held groups go out first in the
next batch (``carried_prompts``), where the request transform continues them under the newer policy
(refills within a step take held groups only beyond ``train_batch_size`` waiting ones).
Logs ``reasonrl/rollout/partial_{held_groups,carried_groups,waiting_groups,continued_responses,
segments_max,earlier_tokens_masked}``.

Seamless rollout (MiMo-7B §3.4.1; ``SeamlessRolloutCallback``): the streaming schedule reasonrl's
replay buffer runs each step — new prompts launched only when the groups in flight cannot meet the
step's demand at the live valid rate (``seamless.tasks_to_launch``), the step stopped by FIFO early
termination (``seamless.fifo_early_termination``, the public facade) and the rest aborted. Logs
MiMo's ratios from the buffer's counts: ``reasonrl/rollout/seamless_{sample_waste,idle_ratio,
rollout_time_s,valid_rate,launched_prompts,aborted_groups,surplus_groups}``.

Staleness-bounded streaming (LongCat §3.1.1 DORA; ``StalenessRolloutCallback``): the seamless
schedule with a ``staleness`` bound — the buffer keeps surplus finished groups for later steps.
Logs ``reasonrl/rollout/staleness_{kept_groups,reused_groups,stale_groups,trained_staleness_max,
trained_staleness_mean}``.
"""

from __future__ import annotations

import json
import random
from typing import Any

from reasonrl.callbacks import CheckpointedState, GroupCarrier, RolloutSchedule, StepCallback
from reasonrl.compat.verl import non_tensor_items
from reasonrl.contracts import STREAM_METRICS, TOKEN_FATES
from reasonrl.plugins.rollout.config import (
    BUDGET_FIELD,
    CARRIED_FIELD,
    PARTIAL_FIELD,
    REPETITION,
    STOP_REASON_FIELD,
    RolloutConfig,
)
from reasonrl.plugins.rollout.partial import HeldGroup, PartialRolloutStore, PartialTrajectory
from reasonrl.plugins.rollout.repetition import penalised
from reasonrl.plugins.rollout.seamless import (
    fifo_early_termination,
    idle_ratio,
    sample_waste,
    tasks_to_launch,
    valid_rate_estimate,
)
from reasonrl.plugins.rollout.staleness import split_kept

FETCHED = ["rm_scores", "response_mask", "extra_fields"]


def stop_reasons(extra_fields: list) -> list[str | None]:
    return [(e or {}).get(STOP_REASON_FIELD) if isinstance(e, dict) else None for e in extra_fields]


def repetition_metrics(reasons: list, masks: list) -> dict[str, float]:
    stopped = [reason == REPETITION for reason in reasons]
    return {
        "reasonrl/rollout/repetition_stops": float(sum(stopped)),
        "reasonrl/rollout/repetition_rate": sum(stopped) / max(1, len(stopped)),
        "reasonrl/rollout/repetition_tokens": float(sum(int(m.sum()) for m, s in zip(masks, stopped) if s)),
        "reasonrl/rollout/stop_reason_known": float(sum(r is not None for r in reasons)),
        "reasonrl/rollout/responses": float(len(reasons)),
    }


def penalised_scores(rm_scores: list, masks: list, stopped: list[bool], penalty: float) -> list:
    """Each stopped response's score tensor with the penalty taken at its last counted token."""
    import torch

    scores = [t.clone() for t in rm_scores]
    totals = [float(t.sum()) for t in scores]
    for i, (before, after) in enumerate(zip(totals, penalised(totals, stopped, penalty))):
        if after != before:
            nonzero = torch.nonzero(masks[i])
            last = int(nonzero.max()) if len(nonzero) else scores[i].numel() - 1
            scores[i][last] += after - before
    return scores


class RolloutCallback(StepCallback):
    """Repeat detection's penalty and rates."""

    def __init__(self, settings: RolloutConfig) -> None:
        self.settings = settings

    def before_advantage(self, trainer, batch, metrics: dict) -> None:
        if self.settings.repetition_detection:
            metrics.update(self._repetition_step(batch))

    def _repetition_step(self, batch) -> dict[str, float]:
        import torch
        import transfer_queue as tq
        from tensordict import TensorDict

        fields = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=FETCHED)
        reasons = stop_reasons(non_tensor_items(fields["extra_fields"]))
        masks = list(fields["response_mask"].unbind())
        step_metrics = repetition_metrics(reasons, masks)
        stopped = [reason == REPETITION for reason in reasons]
        drop = 0.0
        if self.settings.repetition_penalty and any(stopped):
            before = list(fields["rm_scores"].unbind())
            scores = penalised_scores(before, masks, stopped, self.settings.repetition_penalty)
            out = TensorDict(
                {"rm_scores": torch.nested.as_nested_tensor(scores, layout=torch.jagged)}, batch_size=len(batch.keys)
            )
            tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=out)
            # read back what verl's advantage will see: the total reward the penalty removed
            after = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["rm_scores"])
            drop = sum(float(t.sum()) for t in before) - sum(float(t.sum()) for t in after["rm_scores"].unbind())
        step_metrics["reasonrl/rollout/penalised_reward_drop"] = drop
        return step_metrics


def response_records(group) -> list[dict]:
    """A finished group's partial-rollout records, in session order."""
    records = [fields.get(PARTIAL_FIELD) for fields in group.extra_fields]
    records = [r for r in records if r]
    return sorted(records, key=lambda r: int(str(r["key"]).rsplit("/", 1)[-1]))


class PartialRolloutCallback(RolloutCallback, GroupCarrier, CheckpointedState):
    """Partial rollout with a per-iteration token budget (Kimi k1.5 §2.6.2), plus repeat detection."""

    carried_fields = (CARRIED_FIELD,)

    def __init__(self, settings: RolloutConfig) -> None:
        super().__init__(settings)
        self.store = PartialRolloutStore()
        self._step = self._fresh_counts()

    @staticmethod
    def _fresh_counts() -> dict[str, float]:
        names = ("held_groups", "carried_groups", "continued_responses", "segments_max", "earlier_tokens_masked")
        return {f"reasonrl/rollout/partial_{name}": 0.0 for name in names}

    def batch_fields(self, trainer) -> dict[str, int]:
        return {BUDGET_FIELD: int(self.settings.token_budget)}

    def holds_group(self, trainer, extra_fields: list[dict]) -> bool:
        return any((fields.get(PARTIAL_FIELD) or {}).get("unfinished") for fields in extra_fields)

    def carried_prompts(self, trainer, count: int, refill: bool) -> list[tuple[int, dict]]:
        """Held groups go out first at the start of an iteration (Kimi: "continued in a later
        iteration"). A refill within an iteration draws new prompts while at most
        ``train_batch_size`` groups wait, and takes the oldest held groups beyond that: the store
        stays bounded and an iteration ends even when nearly every response outruns the budget."""
        if refill:
            count = min(count, max(0, len(self.store) - int(trainer.config.data.train_batch_size)))
        groups = self.store.take(count)
        self._step["reasonrl/rollout/partial_carried_groups"] += len(groups)
        return [(g.row, {CARRIED_FIELD: json.dumps([r.to_record() for r in g.responses])}) for g in groups]

    def on_groups_finished(self, trainer, groups) -> None:
        step = self._step
        for group in groups:
            records = response_records(group)
            if group.held:
                if group.row is None:
                    raise RuntimeError(f"held group {group.uid} has no dataset row: it cannot be sent out again")
                responses = [PartialTrajectory.from_record({**r, "row": group.row}) for r in records]
                self.store.put(HeldGroup(group.uid, int(group.row), responses))
                step["reasonrl/rollout/partial_held_groups"] += 1
            elif group.trained:
                for record in records:
                    segments = len(record["segments"])
                    step["reasonrl/rollout/partial_continued_responses"] += segments > 1
                    step["reasonrl/rollout/partial_segments_max"] = max(
                        step["reasonrl/rollout/partial_segments_max"], segments
                    )
                    if not self.settings.earlier_segments_in_loss:
                        step["reasonrl/rollout/partial_earlier_tokens_masked"] += sum(map(len, record["segments"][:-1]))

    def before_advantage(self, trainer, batch, metrics: dict) -> None:
        super().before_advantage(trainer, batch, metrics)
        metrics.update(self._step)
        metrics["reasonrl/rollout/partial_waiting_groups"] = float(len(self.store))
        self._step = self._fresh_counts()

    def state_dict(self) -> dict[str, Any]:
        return {"store": json.dumps(self.store.state_dict(), sort_keys=True)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.store.load_state_dict(json.loads(state["store"]))


class SeamlessRolloutCallback(RolloutCallback, RolloutSchedule, CheckpointedState):
    """MiMo's Seamless Rollout Engine on verl's replay buffer (§3.4.1), plus repeat detection.

    The valid rate is counted over every finished group of the run (valid: trainable; dynamic
    sampling: mixed rewards), this step's live ones included, and checkpointed."""

    def __init__(self, settings: RolloutConfig) -> None:
        super().__init__(settings)
        self.valid_finished = 0  # over the run's completed steps
        self.finished = 0
        self._last_rate = 0.0  # the valid rate the last step stopped at (logged)

    def valid_rate(self, view) -> float:
        valid = self.valid_finished + view.valid_finished - view.reused  # reused: counted in an earlier step
        return valid_rate_estimate(valid, self.finished + valid + view.invalid_finished)

    def prompts_to_launch(self, trainer, view) -> int:
        demand = max(0, view.batch_size - view.valid_finished)
        return tasks_to_launch(demand, view.active, self.valid_rate(view), view.free_slots)

    def early_termination(self, trainer, view) -> list[str] | None:
        finish_times = [0.0 if group.finished else None for group in view.groups]
        selected, _stop = fifo_early_termination(finish_times, [g.valid for g in view.groups], view.batch_size)
        if not selected:
            return None
        self._last_rate = self.valid_rate(view)
        self.valid_finished += view.valid_finished - view.reused
        self.finished += view.valid_finished - view.reused + view.invalid_finished
        return [view.groups[index].uid for index in selected]

    def before_advantage(self, trainer, batch, metrics: dict) -> None:
        super().before_advantage(trainer, batch, metrics)
        stream = {key[len(STREAM_METRICS) :]: float(v) for key, v in metrics.items() if key.startswith(STREAM_METRICS)}
        tokens = {fate: stream.get(f"{fate}_tokens", 0.0) for fate in TOKEN_FATES}
        sampling = stream.get("sampling_s", 0.0)
        metrics.update(
            {
                "reasonrl/rollout/seamless_sample_waste": sample_waste(sum(tokens.values()), tokens["trained"]),
                "reasonrl/rollout/seamless_idle_ratio": idle_ratio(stream.get("busy_s", 0.0), sampling),
                "reasonrl/rollout/seamless_rollout_time_s": sampling,
                "reasonrl/rollout/seamless_valid_rate": self._last_rate,
            }
        )
        for count in ("launched_prompts", "aborted_groups", "surplus_groups"):
            metrics[f"reasonrl/rollout/seamless_{count}"] = stream.get(count, 0.0)

    def state_dict(self) -> dict[str, Any]:
        return {"valid_finished": self.valid_finished, "finished": self.finished}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.valid_finished, self.finished = int(state["valid_finished"]), int(state["finished"])


class StalenessRolloutCallback(SeamlessRolloutCallback):
    """LongCat's staleness-bounded streaming (DORA, §3.1.1) on the seamless schedule: the surplus
    finished valid groups stay in reasonrl's replay buffer, tagged with the policy version that
    generated them, and fill up to ``reuse_ratio`` of a later batch while at most ``staleness``
    versions behind the trainer (the buffer applies this callback's ``split_kept`` — the plugin's
    one rule, ``staleness.split_kept`` — to verl's version tags); older ones are cleared and their
    prompts regenerated; batches are shuffled; verl's trainer recomputes the log-probs (and the
    LongCat objective's truncated IS corrects the engine/trainer gap)."""

    COUNTS = ("kept_groups", "reused_groups", "stale_groups", "trained_staleness_max", "trained_staleness_mean")

    keeps_groups = True

    def __init__(self, settings: RolloutConfig) -> None:
        super().__init__(settings)
        self.staleness = int(settings.staleness)
        self.reuse_ratio = float(settings.reuse_ratio)

    def order_batch(self, uids, step, **kwargs):
        """DORA's batches are shuffled (seeded by the step: a resumed run orders them alike)."""
        shuffled = list(uids)
        random.Random(step).shuffle(shuffled)
        return shuffled

    def split_kept(self, kept, trainer_version, batch_size, version_of, launch_of, **kwargs):
        """The plugin's one rule (``staleness.split_kept``), quota ``reuse_ratio · batch_size``."""
        quota = int(self.reuse_ratio * batch_size)
        return split_kept(kept, trainer_version, self.staleness, quota, version_of, launch_of)

    def before_advantage(self, trainer, batch, metrics: dict) -> None:
        super().before_advantage(trainer, batch, metrics)
        for count in self.COUNTS:
            metrics[f"reasonrl/rollout/staleness_{count}"] = float(metrics.get(STREAM_METRICS + count, 0.0))


class DoraRolloutCallback(RolloutCallback):
    """LongCat's DORA (§3.1.1) in trainer mode ``reasonrl_separate_async``: at init end the trainer's
    standalone checkpoint manager becomes DORA's (``verl_dora``: a group of replicas updated at a time,
    the others generating on with their versions) and reasonrl's replay buffer drops a finished group
    by its trajectories' own versions (``dora.too_stale``: verl's ``min_global_steps`` tags) instead of
    its prompt's age. Each trained batch's versions are logged (``reasonrl/rollout/dora_batch_*``) and
    appended to the timeline."""

    def __init__(self, settings: RolloutConfig) -> None:
        super().__init__(settings)
        self.staleness = int(settings.staleness)
        self.group_size = int(settings.dora_update_group)
        self.timeline_path: str | None = None

    def stale_rule(self, step: int, tags: list[dict]) -> bool:
        """The replay buffer's rule: a finished group is evicted at ``step`` when its trajectories'
        oldest version (verl's ``min_global_steps`` tags) lags beyond the bound (``dora.too_stale``)."""
        from reasonrl.plugins.rollout.dora import too_stale

        return too_stale(step, [tag.get("min_global_steps") for tag in tags], self.staleness)

    def on_init_end(self, trainer, **kwargs) -> None:
        import os

        from reasonrl.plugins.rollout.dora import TIMELINE
        from reasonrl.plugins.rollout.verl_dora import build_manager

        if getattr(trainer, "reporting_buffer", None) is None or not hasattr(trainer, "standalone_checkpoint_manager"):
            raise ValueError(
                "reasonrl.rollout.dora: runs in trainer mode reasonrl_separate_async with reasonrl's replay buffer "
                "(+reasonrl/rollout=dora sets both)"
            )
        self.timeline_path = os.path.join(str(trainer.config.trainer.default_local_dir), TIMELINE)
        manager = build_manager(trainer, self.group_size, self.staleness, self.timeline_path)
        # verl's on_init_end has just sent every replica the weights of this step (start or resume)
        manager.versions = [int(trainer.global_steps)] * len(manager.replicas)
        manager.record(list(range(len(manager.replicas))), int(trainer.global_steps), launch=True)
        trainer.standalone_checkpoint_manager = manager
        trainer.reporting_buffer.stale_rule = self.stale_rule
        print(
            f"[reasonrl] DORA: {len(manager.replicas)} generation replicas, {self.group_size} updated per weight sync, "
            f"samples trained at most {self.staleness} versions behind",
            flush=True,
        )

    def before_advantage(self, trainer, batch, metrics: dict) -> None:
        import json
        import time

        super().before_advantage(trainer, batch, metrics)
        step = int(trainer.global_steps)
        # per response: the oldest and newest versions that generated it (verl's tags; they differ when a
        # request crossed its replica's update and was continued on another)
        oldest = [tag.get("min_global_steps") for tag in batch.tags if tag.get("min_global_steps") is not None]
        newest = [tag.get("max_global_steps") for tag in batch.tags if tag.get("max_global_steps") is not None]
        if not oldest:
            return
        metrics["reasonrl/rollout/dora_batch_versions"] = float(len(set(oldest)))
        metrics["reasonrl/rollout/dora_batch_oldest_lag"] = float((step - 1) - min(oldest))
        metrics["reasonrl/rollout/dora_batch_spanning"] = float(sum(a != b for a, b in zip(oldest, newest)))
        if self.timeline_path is not None:
            counts = {str(v): oldest.count(v) for v in sorted(set(oldest))}  # responses per oldest version
            with open(self.timeline_path, "a") as out:
                out.write(json.dumps({"t": time.time(), "step": step, "trained_versions": counts}) + "\n")


def build(config: Any) -> RolloutCallback | None:
    """The callback when repeat detection, partial rollout, seamless, staleness-bounded rollout or DORA is on."""
    from reasonrl.plugins.rollout.config import settings_from

    settings = settings_from(config)
    if settings.dora:
        return DoraRolloutCallback(settings)
    if settings.staleness is not None:
        return StalenessRolloutCallback(settings)
    if settings.seamless:
        return SeamlessRolloutCallback(settings)
    if settings.token_budget is not None:
        return PartialRolloutCallback(settings)
    if settings.repetition_detection:
        return RolloutCallback(settings)
    return None
