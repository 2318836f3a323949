"""verl's ``ReplayBuffer`` that reports every finished prompt group to reasonrl's trainer modes
(``reasonrl_sync``; ``reasonrl_colocate_async`` gets the same class on verl's ``ReplayBufferAsync``,
chosen by verl's own ``trainer_mode`` argument): the groups that go into the batch and the ones verl's DAPO filter
(``algorithm.filter_groups``) evicts or discards as surplus, each with its responses' scores.

It also *holds* groups a callback asks it to (``hold_predicate``, e.g. partial rollout: a group
with an unfinished response): such a group is evicted like a failed one (verl refills its slot)
and reported with ``held=True`` and its responses' reasonrl extra fields, so the callback can
send it out again in a later step. Nothing is dropped silently.

And it runs a callback's *streaming schedule* (``schedule``, e.g. MiMo's seamless rollout): the
schedule decides at each poll how many prompts to launch and when the step stops; the buffer
then aborts the requests still in flight (the trainer's ``abort_requests``), waits for them,
resumes generation, reports them with ``aborted=True`` and trains exactly the chosen groups —
instead of verl's sync DAPO path, which drains every in-flight request before it selects.
A schedule that ``keeps_groups`` (e.g. the rollout plugin's staleness-bounded reuse) keeps the
surplus finished valid groups for later steps: they are tagged with verl's own ``global_steps``
(the policy version that generated every response of the group: requests in flight at a step's
end are aborted, never continued under newer weights), and the schedule's own rule
(``split_kept``) decides at each step which of them the batch reuses, which wait and which it
drops (cleared); the schedule also orders the trained groups (``order_batch``).

Plugged in through verl's own extension point, ``trainer.v1.sampler.custom_sampler``. verl
hands a custom buffer only the basic arguments, so DAPO's settings come through
``trainer.v1.sampler.sampler_kwargs`` (the sampling plugin's option files interpolate them
from ``algorithm.filter_groups`` and ``data.train_batch_size``).
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import transfer_queue as tq

from reasonrl.compat.verl import replay_buffer_async_base, replay_buffer_base, replay_buffer_uid
from reasonrl.contracts import STREAM_METRICS, TOKEN_FATES, RolloutGroup, RolloutView

ReplayBuffer = replay_buffer_base()  # version-guarded: this class overrides verl internals (compat.verl.REPLAY_BUFFER)
ReplayBufferAsync = replay_buffer_async_base()


@dataclass
class FinishedGroup:
    """One prompt's finished responses as verl's TransferQueue holds them."""

    uid: str
    rewards: list[float]  # per response: summed rm_scores
    reward_extra_info: list[dict]  # per response: the reward manager's extra info
    trained: bool  # False: evicted by the DAPO filter, discarded as surplus, held or aborted
    held: bool = False  # held back by a callback's hold_predicate (not an outcome: not scored)
    aborted: bool = False  # stopped in flight by a streaming schedule (not an outcome: not scored)
    #: per response (in key order): its ``extra_fields`` entries named ``reasonrl_*``
    extra_fields: list[dict] = field(default_factory=list)

    @property
    def outcome(self) -> bool:
        """Whether the group's rewards say how the policy did on its prompt (not held, not aborted)."""
        return not (self.held or self.aborted)


#: Extra fields whose names start with this reach the FinishedGroup records.
REASONRL_FIELD_PREFIX = "reasonrl_"


class ReportingReplayBuffer(ReplayBuffer):
    def __new__(cls, *args, trainer_mode: str = "sync", **kwargs):
        """One sampler name for every trainer mode: verl's async modes get the same reporting on
        verl's ``ReplayBufferAsync`` (:class:`ReportingReplayBufferAsync`)."""
        if cls is ReportingReplayBuffer and trainer_mode != "sync":
            cls = ReportingReplayBufferAsync
        return super().__new__(cls)

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
        #: a callback with prompts_to_launch/early_termination (None: verl's own sample loop)
        self.schedule: Any = None
        #: uid -> launch number, filled by the trainer as it dispatches prompts
        self.launch_order: dict[str, int] = {}
        #: the trainer's abort of every in-flight request (rejecting late arrivals) and its resume
        self.abort_requests: Callable[[], Any] | None = None
        self.resume_requests: Callable[[], Any] | None = None
        self.poll_interval = float(options.get("poll_interval", self.poll_interval))
        self._aborted: set[str] = set()  # uids aborted this step: not evicted, not outcomes
        self._step_tokens: Counter = Counter()  # response tokens this step, by fate

    def _groups(self, partition_id: str, uids, trained: bool) -> list[FinishedGroup]:
        keys = sorted(key for key in self.partitions[partition_id] if replay_buffer_uid(key) in uids)
        if not keys:
            return []
        data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["rm_scores", "extra_fields"])
        groups: dict[str, FinishedGroup] = {}
        for key, scores, extra in zip(keys, data["rm_scores"], list(data["extra_fields"])):
            uid = replay_buffer_uid(key)
            held = self._hold_verdicts.get(uid, False)
            aborted = uid in self._aborted
            group = groups.setdefault(uid, FinishedGroup(uid, [], [], trained and not held, held, aborted))
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
        failed = failed | self._held_uids(partition_id)
        if self._aborted:  # aborted groups are cleared as such once they are back, never evicted
            stale, dapo, failed = stale - self._aborted, dapo - self._aborted, failed - self._aborted
        return stale, dapo, failed, dapo_counts

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
        # evicted (DAPO, failed, held), surplus and aborted groups: reported before verl drops them
        self._report(partition_id, uids, trained=False)
        if partition_id == "train" and self.schedule is not None:
            self._step_tokens["aborted"] += self._response_tokens(partition_id, set(uids) & self._aborted)
            self._step_tokens["untrained"] += self._response_tokens(partition_id, set(uids) - self._aborted)
        super()._clear_groups(partition_id, uids)
        for uid in uids:
            self._hold_verdicts.pop(uid, None)

    def _materialize_batch(self, partition_id, selected_prompt_uids, partition_snapshot):
        self._report(partition_id, selected_prompt_uids, trained=True)
        if partition_id == "train" and self.schedule is not None:
            self._step_tokens["trained"] += self._response_tokens(partition_id, set(selected_prompt_uids))
        for uid in selected_prompt_uids:
            self._hold_verdicts.pop(uid, None)
        return super()._materialize_batch(partition_id, selected_prompt_uids, partition_snapshot)

    # ------------------------------------------------------------------ streaming schedule
    def sample(self, global_steps: int, partition_id: str, batch_size: int):
        if partition_id == "val" or self.schedule is None:
            return super().sample(global_steps, partition_id, batch_size)
        return self._sample_scheduled(global_steps, partition_id, batch_size)

    def _response_tokens(self, partition_id: str, uids: set[str]) -> int:
        return sum(
            int(tag.get("response_len", 0))
            for key, tag in self.partitions[partition_id].items()
            if replay_buffer_uid(key) in uids
        )

    def _view(
        self, partition_id: str, sampleable: set[str], batch_size: int, invalid: int, reused: list[str]
    ) -> RolloutView:
        """The step's groups: the reused ones first (launched in earlier steps), then launch order."""
        inflight = self.pending_keys[partition_id] | self.running_keys[partition_id]
        last = len(self.launch_order)
        fresh = sorted((sampleable | inflight) - set(reused), key=lambda uid: (self.launch_order.get(uid, last), uid))
        groups = tuple(RolloutGroup(uid, uid in sampleable, uid in sampleable) for uid in [*reused, *fresh])
        free = max(0, self.max_inflight_gen_batches * (self.train_batch_size or batch_size) - len(inflight))
        return RolloutView(groups, batch_size, invalid, free, reused=len(reused))

    # ------------------------------------------------------------------ groups kept across steps
    @property
    def keeps_groups(self) -> bool:
        """Whether finished groups outlive their step (the schedule keeps them)."""
        return self.schedule is not None and bool(self.schedule.keeps_groups)

    def _version_lag(self, global_steps: int, partition_id: str, uid: str) -> int:
        """Policy versions the trainer is ahead of the one that generated the group (verl's tag)."""
        return global_steps - self.prompt_global_steps[partition_id].get(uid, global_steps)

    def _kept_for_step(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[list[str], set[str], int]:
        """At a step's start every finished group was kept by an earlier step; the schedule's own rule
        (``split_kept``: the rollout plugin's, the one the simulator and the bench run) splits them
        into those this batch reuses (in order), those that wait (``parked``, out of this step) and
        those it drops, which are cleared (reported untrained). Returns (reused, parked, cleared)."""
        tags, last = self.prompt_global_steps[partition_id], len(self.launch_order)
        reused, waiting, stale = self.schedule.split_kept(
            sorted(self.finished_keys[partition_id]),  # uid order breaks ties of version and launch
            global_steps,
            batch_size,
            version_of=lambda uid: tags.get(uid, global_steps),  # untagged: generated by this version
            launch_of=lambda uid: self.launch_order.get(uid, last),
        )
        self._clear_groups(partition_id, set(stale))
        return list(reused), set(waiting), len(stale)

    def kept_groups_digest(self, partition_id: str = "train") -> tuple[int, str]:
        """(groups, sha256) of the finished groups the buffer holds: keys, verl's tags and response
        tokens — equal before a checkpoint and after its restore when nothing was lost."""
        self._sync_metadata_from_transfer_queue()
        uids = sorted(self.finished_keys[partition_id])
        keys = sorted(key for key in self.partitions[partition_id] if replay_buffer_uid(key) in set(uids))
        h = hashlib.sha256()
        for uid in uids:
            h.update(f"{uid}:{self.prompt_global_steps[partition_id].get(uid)}".encode())
        if keys:
            data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["responses"])
            for key, responses in zip(keys, data["responses"].unbind()):
                h.update(key.encode() + b"\0" + responses.numpy().tobytes())
        return len(uids), h.hexdigest()

    def _poll_wait(self) -> None:
        time.sleep(self.poll_interval)

    def _sample_scheduled(self, global_steps: int, partition_id: str, batch_size: int):
        """One training batch under the callback's schedule (see the module docstring)."""
        metrics: dict = {}
        self._aborted, self._step_tokens = set(), Counter()
        invalid = launched = 0
        selected: list[str] | None = None
        start = last_poll = time.monotonic()
        busy = 0.0
        reused: list[str] = []
        parked: set[str] = set()  # kept groups beyond this step's reuse quota: untouched
        stale = 0
        if self.keeps_groups:
            self._sync_metadata_from_transfer_queue()
            reused, parked, stale = self._kept_for_step(global_steps, partition_id, batch_size)
        while True:
            self._sync_metadata_from_transfer_queue()
            reasons = self._terminal_eviction_reasons(global_steps, partition_id)
            reasons = (reasons[0], reasons[1] - parked, reasons[2] - parked, reasons[3])
            evicted, _stale, _dapo, evict_metrics = self._evict_terminal_groups(global_steps, partition_id, reasons)
            _add_metrics(metrics, evict_metrics)
            invalid += len(evicted)
            inflight = self.pending_keys[partition_id] | self.running_keys[partition_id]
            now = time.monotonic()
            busy += (now - last_poll) if inflight else 0.0  # engine busy between polls (poll resolution)
            last_poll = now
            if selected is None:
                sampleable = self._sampleable_terminal_keys(partition_id, reasons) - parked
                view = self._view(partition_id, sampleable, batch_size, invalid, reused)
                choice = self.schedule.early_termination(view)
                if choice:
                    selected = list(choice)
                    self._aborted = set(inflight)
                    if inflight:
                        self.abort_requests()  # aborted requests return at once, late arrivals are rejected
                    continue
                launch = min(int(self.schedule.prompts_to_launch(view)), view.free_slots)
                if launch > 0:
                    self.refill_fn(launch)
                    launched += launch
                    continue
            elif not (inflight & self._aborted):  # every aborted request is back
                break
            self._poll_wait()
        if self._aborted:
            self.resume_requests()
        surplus = (self.finished_keys[partition_id] | self.failure_keys[partition_id]) - set(selected) - parked
        kept: set[str] = set()
        if self.keeps_groups:  # the finished valid surplus stays for later steps (aborted ones never);
            # the last poll ran after every aborted request was back: its reasons are current
            kept = (self._sampleable_terminal_keys(partition_id, reasons) & surplus) - self._aborted
        self._clear_groups(partition_id, surplus - kept)  # aborted ones (reported aborted) and surplus finished ones
        counts = {
            "launched_prompts": launched,
            "aborted_groups": len(self._aborted),
            "surplus_groups": len(surplus - self._aborted - kept),
            "invalid_groups": invalid,
            "busy_s": busy,
            "sampling_s": time.monotonic() - start,
        }
        if self.keeps_groups:
            lags = [self._version_lag(global_steps, partition_id, uid) for uid in selected]
            counts.update(
                {
                    "kept_groups": len(kept | parked),
                    "reused_groups": len(set(reused) & set(selected)),
                    "stale_groups": stale,
                    "trained_staleness_max": max(lags),
                    "trained_staleness_mean": sum(lags) / len(lags),
                }
            )
        metrics.update({STREAM_METRICS + name: value for name, value in counts.items()})
        partition_snapshot = dict(self.partitions[partition_id])
        ordered = list(self.schedule.order_batch(list(selected), global_steps))
        if sorted(ordered) != sorted(selected):
            raise RuntimeError("the rollout schedule's order_batch must return the selected groups, reordered")
        if ordered != selected:  # verl orders a batch as its snapshot
            selected = ordered
            rank = {uid: index for index, uid in enumerate(selected)}
            partition_snapshot = dict(
                sorted(partition_snapshot.items(), key=lambda item: rank.get(replay_buffer_uid(item[0]), len(rank)))
            )
        batch = self._materialize_batch(partition_id, selected, partition_snapshot)
        metrics.update({f"{STREAM_METRICS}{fate}_tokens": self._step_tokens[fate] for fate in TOKEN_FATES})
        self._aborted = set()
        return batch, metrics


class ReportingReplayBufferAsync(ReportingReplayBuffer, ReplayBufferAsync):
    """The reporting buffer on verl's async sampling (stale / DAPO / failed groups evicted and
    refilled one for one, ``max_off_policy_threshold``): finished groups reported as in the sync
    buffer; no held groups or streaming schedule (the trainer refuses those outside reasonrl_sync).

    A callback may replace verl's staleness rule (the prompt's age in steps since it was submitted)
    by one on the trajectories' own version tags (``stale_rule``)."""

    #: given the step and a finished group's trajectory tags (verl's ``min_global_steps`` /
    #: ``max_global_steps``: the policy versions that generated each response), True to evict the group
    #: as stale (verl refills its slot); None: verl's rule
    stale_rule: Callable[[int, list[dict]], bool] | None = None

    def _stale_terminal_keys(self, global_steps: int, partition_id: str) -> set[str]:
        if self.stale_rule is None or partition_id == "val":
            return super()._stale_terminal_keys(global_steps, partition_id)
        tags: dict[str, list[dict]] = {}
        for key, tag in self.partitions[partition_id].items():
            tags.setdefault(replay_buffer_uid(key), []).append(tag)
        return {uid for uid in self.finished_keys[partition_id] if self.stale_rule(global_steps, tags.get(uid, []))}


def _add_metrics(total: dict, new: dict) -> None:
    """Accumulate one poll's eviction metrics (counts add up; verl's dict of DAPO-filtered reward
    counts merges). Sync sampling evicts nothing for staleness, so no mean needs weighting."""
    for key, value in new.items():
        if isinstance(value, dict):
            total[key] = dict(Counter(total.get(key, {})) + Counter(value))
        else:
            total[key] = total.get(key, 0) + value


def reasonrl_fields(extra_fields: dict) -> dict:
    """A response's extra fields that reasonrl plugins put there (``reasonrl_*``)."""
    return {k: v for k, v in extra_fields.items() if str(k).startswith(REASONRL_FIELD_PREFIX)}
