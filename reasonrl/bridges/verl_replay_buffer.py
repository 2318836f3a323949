"""verl's sync ``ReplayBuffer`` that reports every finished prompt group to trainer mode
``reasonrl_sync``: the groups that go into the batch and the ones verl's DAPO filter
(``algorithm.filter_groups``) evicts or discards as surplus, each with its responses' scores.

Plugged in through verl's own extension point, ``trainer.v1.sampler.custom_sampler``. verl
hands a custom buffer only the basic arguments, so DAPO's settings come through
``trainer.v1.sampler.sampler_kwargs`` (the sampling plugin's option files interpolate them
from ``algorithm.filter_groups`` and ``data.train_batch_size``).
"""

from __future__ import annotations

from dataclasses import dataclass
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
    trained: bool  # False: evicted by the DAPO filter or discarded as surplus


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

    def _groups(self, partition_id: str, uids, trained: bool) -> list[FinishedGroup]:
        keys = sorted(key for key in self.partitions[partition_id] if replay_buffer_uid(key) in uids)
        if not keys:
            return []
        data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["rm_scores", "extra_fields"])
        groups: dict[str, FinishedGroup] = {}
        for key, scores, extra in zip(keys, data["rm_scores"], list(data["extra_fields"])):
            uid = replay_buffer_uid(key)
            group = groups.setdefault(uid, FinishedGroup(uid, [], [], trained))
            group.rewards.append(float(scores.sum().item()))
            extra = getattr(extra, "data", extra)
            group.reward_extra_info.append(dict(extra.get("reward_extra_info", {})) if isinstance(extra, dict) else {})
        return list(groups.values())

    def _report(self, partition_id: str, uids, trained: bool) -> None:
        if partition_id == "train" and self.group_listener is not None and uids:
            self.group_listener(self._groups(partition_id, set(uids), trained))

    def _clear_groups(self, partition_id: str, uids: set[str]) -> None:
        # evicted (DAPO, failed) and surplus groups: reported before verl drops them
        self._report(partition_id, uids, trained=False)
        super()._clear_groups(partition_id, uids)

    def _materialize_batch(self, partition_id, selected_prompt_uids, partition_snapshot):
        self._report(partition_id, selected_prompt_uids, trained=True)
        return super()._materialize_batch(partition_id, selected_prompt_uids, partition_snapshot)
