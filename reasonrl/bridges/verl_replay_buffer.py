"""verl's sync ``ReplayBuffer`` that reports every finished prompt group to trainer mode
``reasonrl_sync``: the groups that go into the batch and the ones verl's DAPO filter
(``algorithm.filter_groups``) evicts or discards as surplus, each with its responses' scores.

It also *holds* groups a callback asks it to (``hold_predicate``, e.g. partial rollout: a group
with an unfinished response): such a group is evicted like a failed one (verl refills its slot)
and reported with ``held=True`` and its responses' reasonrl extra fields, so the callback can
send it out again in a later step. Nothing is dropped silently.

Plugged in through verl's own extension point, ``trainer.v1.sampler.custom_sampler``. verl
hands a custom buffer only the basic arguments, so DAPO's settings come through
``trainer.v1.sampler.sampler_kwargs`` (the sampling plugin's option files interpolate them
from ``algorithm.filter_groups`` and ``data.train_batch_size``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import transfer_queue as tq

from reasonrl.compat.verl import replay_buffer_base, replay_buffer_uid

ReplayBuffer = replay_buffer_base()  # version-guarded: this class overrides verl internals (compat.verl.REPLAY_BUFFER)


@dataclass
class FinishedGroup:
    """One prompt's finished responses as verl's TransferQueue holds them."""

    uid: str
    rewards: list[float]  # per response: summed rm_scores
    reward_extra_info: list[dict]  # per response: the reward manager's extra info
    trained: bool  # False: evicted by the DAPO filter, discarded as surplus, or held
    held: bool = False  # held back by a callback's hold_predicate (not an outcome: not scored)
    #: per response (in key order): its ``extra_fields`` entries named ``reasonrl_*``
    extra_fields: list[dict] = field(default_factory=list)


#: Extra fields whose names start with this reach the FinishedGroup records.
REASONRL_FIELD_PREFIX = "reasonrl_"


class ReportingReplayBuffer(ReplayBuffer):
    def __init__(self, *, sampler_kwargs, **kwargs):
        options = dict(sampler_kwargs or {})
        metric = options.get("filter_groups_metric") if options.get("filter_groups_enable") else None
        refill_failed = bool(options.get("sync_refill_failed_groups", False))
        super().__init__(  # what verl's _build_replay_buffer passes its own sync buffer
            sampler_kwargs=sampler_kwargs,
            filter_groups_metric=metric or None,
            train_batch_size=options.get("train_batch_size"),
            gen_batch_size=1
            if metric or refill_failed
            else options.get("gen_batch_size") or options.get("train_batch_size"),
            max_inflight_gen_batches=int(options.get("max_inflight_gen_batches", 1)) if metric else 1,
            sync_refill_failed_groups=refill_failed,
            **kwargs,
        )
        self.group_listener: Callable[[list[FinishedGroup]], None] | None = None
        #: given a finished group's per-response reasonrl extra fields: True to hold the group back
        self.hold_predicate: Callable[[list[dict]], bool] | None = None
        self._hold_verdicts: dict[str, bool] = {}  # finished groups never change: judged once

    def _groups(self, partition_id: str, uids, trained: bool) -> list[FinishedGroup]:
        keys = sorted(key for key in self.partitions[partition_id] if replay_buffer_uid(key) in uids)
        if not keys:
            return []
        data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["rm_scores", "extra_fields"])
        groups: dict[str, FinishedGroup] = {}
        for key, scores, extra in zip(keys, data["rm_scores"], list(data["extra_fields"])):
            uid = replay_buffer_uid(key)
            held = self._hold_verdicts.get(uid, False)
            group = groups.setdefault(uid, FinishedGroup(uid, [], [], trained and not held, held))
            group.rewards.append(float(scores.sum().item()))
            extra = getattr(extra, "data", extra)
            extra = extra if isinstance(extra, dict) else {}
            group.reward_extra_info.append(dict(extra.get("reward_extra_info", {})))
            group.extra_fields.append(reasonrl_fields(extra))
        return list(groups.values())

    # ------------------------------------------------------------------ held groups
    def _held_uids(self, partition_id: str) -> set[str]:
        if partition_id != "train" or self.hold_predicate is None:
            return set()
        unjudged = sorted(uid for uid in self.finished_keys[partition_id] if uid not in self._hold_verdicts)
        keys = sorted(key for key in self.partitions[partition_id] if replay_buffer_uid(key) in set(unjudged))
        if keys:
            data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["extra_fields"])
            per_group: dict[str, list[dict]] = {}
            for key, extra in zip(keys, list(data["extra_fields"])):
                extra = getattr(extra, "data", extra)
                per_group.setdefault(replay_buffer_uid(key), []).append(
                    reasonrl_fields(extra if isinstance(extra, dict) else {})
                )
            for uid, fields in per_group.items():
                self._hold_verdicts[uid] = bool(self.hold_predicate(fields))
        return {uid for uid in self.finished_keys[partition_id] if self._hold_verdicts.get(uid)}

    def _terminal_eviction_reasons(self, global_steps: int, partition_id: str):
        """verl's reasons plus held groups, evicted (and refilled) as failed ones are."""
        stale, dapo, failed, dapo_counts = super()._terminal_eviction_reasons(global_steps, partition_id)
        return stale, dapo, failed | self._held_uids(partition_id), dapo_counts

    def _evict_terminal_groups(self, global_steps: int, partition_id: str, eviction_reasons):
        held = {uid for uid in eviction_reasons[2] if self._hold_verdicts.get(uid)}
        evicted, stale_count, dapo_count, metrics = super()._evict_terminal_groups(
            global_steps, partition_id, eviction_reasons
        )
        if held:  # verl counts them as rollout failures: they are not
            prefix = self._metrics_prefix(partition_id)
            failures = metrics.pop(f"{prefix}/rollout_failure/evicted_samples", 0) - len(held)
            if failures:
                metrics[f"{prefix}/rollout_failure/evicted_samples"] = failures
            metrics[f"{prefix}/held_groups"] = len(held)
        return evicted, stale_count, dapo_count, metrics

    def _report(self, partition_id: str, uids, trained: bool) -> None:
        if partition_id == "train" and self.group_listener is not None and uids:
            self.group_listener(self._groups(partition_id, set(uids), trained))

    def _clear_groups(self, partition_id: str, uids: set[str]) -> None:
        # evicted (DAPO, failed, held) and surplus groups: reported before verl drops them
        self._report(partition_id, uids, trained=False)
        super()._clear_groups(partition_id, uids)
        for uid in uids:
            self._hold_verdicts.pop(uid, None)

    def _materialize_batch(self, partition_id, selected_prompt_uids, partition_snapshot):
        self._report(partition_id, selected_prompt_uids, trained=True)
        for uid in selected_prompt_uids:
            self._hold_verdicts.pop(uid, None)
        return super()._materialize_batch(partition_id, selected_prompt_uids, partition_snapshot)


def reasonrl_fields(extra_fields: dict) -> dict:
    """A response's extra fields that reasonrl plugins put there (``reasonrl_*``)."""
    return {k: v for k, v in extra_fields.items() if str(k).startswith(REASONRL_FIELD_PREFIX)}
