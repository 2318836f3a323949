"""The trainer classes behind verl trainer modes ``reasonrl_sync``, ``reasonrl_colocate_async`` and
``reasonrl_separate_async`` (see ``verl_trainer.py``): one mixin, :class:`ReasonrlTrainerMixin` — plugin
callbacks, prompt source, checkpointed state — on verl's ``PPOTrainerSync``, its
``PPOTrainerColocateAsync`` (verl's partial rollout: unfinished requests aborted at the end of sampling
and resumed after the weight update) and its ``PPOTrainerSeparateAsync`` (generation on standalone
replicas, weights sent through a checkpoint engine).

Imported only where verl's trainers are imported (verl's TaskRunner), never at ``import verl``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
import uuid
from collections import defaultdict
from functools import partial
from types import SimpleNamespace

import numpy as np
import transfer_queue as tq
from verl.utils import tensordict_utils as tu
from verl.utils.dataset.rl_dataset import collate_fn

from reasonrl import startup_clock
from reasonrl.bridges import verl_actor_loss
from reasonrl.bridges.verl_trainer import build_callbacks, callback_state_path, single_prompt_source
from reasonrl.callbacks import CALLBACK_TIMING, CheckpointedState, GroupCarrier, RolloutSchedule, single
from reasonrl.checkpoints import after_verl_save, before_verl_save, load_checkpointed_state
from reasonrl.compat.verl import colocate_async_trainer_base, separate_async_trainer_base, sync_trainer_base
from reasonrl.evaluation import validation_pass_at_k
from reasonrl.state_io import digest, save_state

#: verl's folder for TransferQueue's checkpoint in a step's checkpoint (its async modes use it too)
TQ_FOLDER = "transfer_queue"
#: the kept groups' record beside it (``global_step_<n>/reasonrl/kept_groups.npz``)
KEPT_GROUPS = "kept_groups"
#: the dataset rows of the prompts verl's async checkpoint holds in flight (``reasonrl/prompt_rows.npz``)
PROMPT_ROWS = "prompt_rows"
#: per step: finished groups of reasonrl's prompt source whose dataset row was unknown (0 unless lost)
GROUPS_WITHOUT_ROW = "reasonrl/trainer/groups_without_prompt_row"
#: the trainer attributes verl's ``_setup`` assigns as each part of the start-up comes up, and what
#: the start-up record calls the part that ended there (``reasonrl.startup_clock``)
SETUP_PARTS = {
    "actor_rollout_wg": "dataset, tokenizer, worker processes spawned",
    "reward_loop_manager": "actor model built, reward workers",
    "llm_server_manager": "vLLM servers",
    "checkpoint_manager": "checkpoint engine",
}

PPOTrainerSync = sync_trainer_base()  # version-guarded: overrides verl internals (compat.verl.SYNC_TRAINER)
PPOTrainerColocateAsync = colocate_async_trainer_base()  # likewise (compat.verl.ASYNC_TRAINER)
PPOTrainerSeparateAsync = separate_async_trainer_base()  # likewise (compat.verl.SEPARATE_ASYNC_TRAINER)


class ReasonrlTrainerMixin:
    """reasonrl's per-step plugin callbacks on one of verl's v1 trainers (listed first in the bases)."""

    #: the verl mode this trainer behaves as: verl branches on the mode's *name* in several places
    VERL_MODE = "sync"

    def __init__(self, *args, **kwargs):
        startup_clock.mark("TaskRunner up, TransferQueue started")
        self.callback_seconds: dict[str, float] = defaultdict(float)
        self._first_step_begun = False
        super().__init__(*args, **kwargs)

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name in SETUP_PARTS:
            startup_clock.mark(SETUP_PARTS[name])

    @contextlib.contextmanager
    def _timed(self, name: str):
        """Add the block's seconds to callback ``name``'s time in this step (logged with the step)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.callback_seconds[name] += time.perf_counter() - start

    def _timing(self, name: str, function):
        """``function``, its seconds added to callback ``name``'s time (for calls the replay buffer makes)."""

        def timed(*args, **kwargs):
            with self._timed(name):
                return function(*args, **kwargs)

        return timed

    def _log_callback_seconds(self, metrics: dict) -> None:
        metrics.update({CALLBACK_TIMING + name: seconds for name, seconds in self.callback_seconds.items()})
        self.callback_seconds.clear()

    def _build_replay_buffer(self):
        self.trainer_mode = self.VERL_MODE  # called from __init__, before anything reads the mode
        # imported here: the replay buffer's module imports verl's trainer package, whose import
        # registers these trainer classes
        from reasonrl.bridges.verl_replay_buffer import ReportingReplayBuffer

        buffer = super()._build_replay_buffer()
        self.reporting_buffer = buffer if isinstance(buffer, ReportingReplayBuffer) else None
        if self.reporting_buffer is not None:
            buffer.group_listener = self._groups_finished
        return buffer

    def on_init_end(self):
        startup_clock.mark("checkpoint loaded")
        super().on_init_end()
        self.reasonrl_callbacks = build_callbacks(self.config)
        self.actor_loss = verl_actor_loss.install(self, self.reasonrl_callbacks)  # one loss: verl's + every term
        self.prompt_source_name, self.prompt_source = single_prompt_source(self.reasonrl_callbacks)
        self.prompt_rows: dict[str, int] = {}
        self.groups_without_row = 0
        self.launch_order: dict[str, int] = {}  # uid -> launch number (streaming schedules order by it)
        self._launch_numbers = itertools.count()
        self._wire_carried_groups()
        self._wire_schedule()
        for _name, callback in self.reasonrl_callbacks:
            callback.on_init_end(self)
        self._restore_callback_states()
        self._restore_kept_groups()
        self._restore_inflight_prompt_rows()
        startup_clock.mark("reasonrl callbacks built, state restored")

    def fit(self, *args, **kwargs):
        startup_clock.mark("agent-loop workers")  # verl's TaskRunner builds them between init and fit
        return super().fit(*args, **kwargs)

    def on_validate_end(self):
        super().on_validate_end()
        if not self._first_step_begun:
            startup_clock.mark("validation before training")

    def on_train_begin(self):
        super().on_train_begin()
        self._first_step_begun = True
        startup_clock.mark(startup_clock.FIRST_STEP)

    def _wire_carried_groups(self) -> None:
        """Callbacks that hold finished groups back (``holds_group``) and send them out again
        (``carried_prompts``) need reasonrl's replay buffer and prompt source."""
        carriers = [n for n, c in self.reasonrl_callbacks if isinstance(c, GroupCarrier)]
        if carriers:
            if self.reporting_buffer is None:
                raise ValueError(
                    "trainer.v1.sampler.custom_sampler: a reasonrl callback holds groups back (partial rollout); "
                    "it needs reasonrl's ReportingReplayBuffer (pkg://reasonrl.bridges.verl_replay_buffer)"
                )
            holds = [
                self._timing(n, partial(c.holds_group, self))
                for n, c in self.reasonrl_callbacks
                if isinstance(c, GroupCarrier)
            ]
            self.reporting_buffer.hold_predicate = lambda fields: any(hold(fields) for hold in holds)
        if carriers and self.prompt_source is None:
            raise ValueError(
                f"reasonrl callback(s) {carriers} send held prompt groups out again, which needs reasonrl's prompt "
                "source (a callback with next_prompts, e.g. +reasonrl/sampling=<option>)"
            )

    def _wire_schedule(self) -> None:
        """A callback with a streaming rollout schedule (``prompts_to_launch`` + ``early_termination``)
        drives reasonrl's replay buffer; the buffer aborts and resumes generation through verl's
        checkpoint manager (``reject_request``: requests not yet admitted fail at once instead of
        waiting for a resume, so the abort drains)."""
        schedule = single(self.reasonrl_callbacks, RolloutSchedule)
        if schedule is None:
            return
        name, callback = schedule
        if self.trainer_mode != "sync":
            raise ValueError(
                f"trainer.v1.trainer_mode: reasonrl callback {name!r} schedules a synchronous step; it runs in "
                "trainer mode reasonrl_sync"
            )
        if self.reporting_buffer is None:
            raise ValueError(
                f"trainer.v1.sampler.custom_sampler: reasonrl callback {name!r} schedules the rollout; it needs "
                "reasonrl's ReportingReplayBuffer (pkg://reasonrl.bridges.verl_replay_buffer)"
            )
        buffer = self.reporting_buffer
        buffer.schedule = SimpleNamespace(
            early_termination=self._timing(name, partial(callback.early_termination, self)),
            prompts_to_launch=self._timing(name, partial(callback.prompts_to_launch, self)),
            keeps_groups=callback.keeps_groups,  # finished groups outlive their step
            split_kept=self._timing(name, callback.split_kept),  # the schedule's own rule for the kept groups
            order_batch=self._timing(name, callback.order_batch),
        )
        buffer.launch_order = self.launch_order
        buffer.abort_requests = lambda: self.checkpoint_manager.abort_replicas(reject_request=True)
        buffer.resume_requests = lambda: self.checkpoint_manager.resume_generation_replicas()

    # ---------------------------------------------------------------- prompts and outcomes
    def _next_train_batch(self, num_prompts: int | None = None):
        batch = self._next_prompt_batch(num_prompts)
        for uid in batch["uid"]:  # launch order (a DAPO refill's prompts follow the earlier ones)
            self.launch_order[str(uid)] = next(self._launch_numbers)
        # every callback's batch-level fields on every training batch and DAPO refill (never on
        # validation batches, which verl's _validate builds itself); verl's agent loops receive
        # them in run(**kwargs)
        for name, callback in self.reasonrl_callbacks:
            with self._timed(name):
                fields = callback.batch_fields(self)
            for key, value in fields.items():
                tu.assign_non_tensor_data(batch, key, value)
        return batch

    def _next_prompt_batch(self, num_prompts: int | None):
        if self.prompt_source is None:
            return super()._next_train_batch(num_prompts)
        count = num_prompts or self.config.data.train_batch_size
        carried: list[tuple[int, dict]] = []  # held groups go out first (partial rollout)
        row_fields: set[str] = set()  # on every training batch, so every response has the same fields
        for name, callback in self.reasonrl_callbacks:
            if isinstance(callback, GroupCarrier):
                row_fields.update(callback.carried_fields)
                if len(carried) < count:
                    with self._timed(name):
                        carried += callback.carried_prompts(self, count - len(carried), refill=num_prompts is not None)
        rows = [row for row, _fields in carried]
        if count > len(carried):
            with self._timed(self.prompt_source_name):
                rows += list(
                    self.prompt_source.next_prompts(self, count - len(carried), refill=num_prompts is not None)
                )
        batch_dict = collate_fn([self.train_dataset[int(row)] for row in rows])
        for key in sorted(row_fields):  # per-row fields of the carried groups, "" elsewhere
            values = [fields.get(key, "") for _row, fields in carried] + [""] * (len(rows) - len(carried))
            batch_dict[key] = np.array(values, dtype=object)
        uids = [str(uuid.uuid4()) for _ in rows]
        batch_dict["uid"] = np.array(uids, dtype=object)
        self.prompt_rows.update(zip(uids, (int(row) for row in rows)))
        batch = tu.get_tensordict(batch_dict)
        tu.assign_non_tensor_data(batch, "global_steps", self.global_steps)
        return batch

    def _groups_finished(self, groups) -> None:
        for group in groups:
            group.row = self.prompt_rows.pop(group.uid, None)
            self.launch_order.pop(group.uid, None)
            # a group of reasonrl's prompt source whose row is lost: its outcome cannot reach the source
            self.groups_without_row += self.prompt_source is not None and group.row is None
        for name, callback in self.reasonrl_callbacks:
            with self._timed(name):
                callback.on_groups_finished(self, groups)

    # ---------------------------------------------------------------- per-step callbacks
    def _compute_advantage(self, batch, metrics: dict):
        metrics[GROUPS_WITHOUT_ROW], self.groups_without_row = self.groups_without_row, 0
        for name, callback in self.reasonrl_callbacks:
            with self._timed(name):
                callback.before_advantage(self, batch, metrics)
        return super()._compute_advantage(batch, metrics)

    def _update_actor(self, batch, metrics: dict):
        for name, callback in self.reasonrl_callbacks:
            with self._timed(name):
                callback.before_actor_update(self, batch.extra_info, metrics)
        self._log_callback_seconds(metrics)  # what the step's callbacks cost, up to here
        return super()._update_actor(batch, metrics)

    # ---------------------------------------------------------------- validation
    def _val_metrics_update(self, data_sources, sample_uids, reward_extra_infos_dict, *args, **kwargs):
        """verl's validation metrics (mean@n = avg@n, bootstrap best@k, maj@k) plus the unbiased
        pass@k of every data source (``val-aux/<source>/acc/pass@<k>``; reasonrl.evaluation)."""
        metrics = super()._val_metrics_update(data_sources, sample_uids, reward_extra_infos_dict, *args, **kwargs)
        metrics.update(validation_pass_at_k(data_sources, sample_uids, reward_extra_infos_dict))
        return metrics

    # ---------------------------------------------------------------- checkpoints
    def _save_checkpoint(self):
        # before verl's own save: its latest_checkpointed_iteration.txt, written last, then
        # marks a checkpoint that holds the plugins' state too
        folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
        before_verl_save(folder)  # a folder of this step from an earlier launch: replaced, not mixed in
        for name, callback in self.reasonrl_callbacks:
            if isinstance(callback, CheckpointedState):
                save_state(callback_state_path(folder, name), callback.state_dict())
        self._save_kept_groups(folder)
        self._save_inflight_prompt_rows(folder)
        super()._save_checkpoint()
        # the step's manifest (size and sha256 of its files: reasonrl.checkpoints), then verl's
        # retention (max_actor_ckpt_to_keep) carried over to the whole step folders
        after_verl_save(self.config, self.global_steps)

    def _save_inflight_prompt_rows(self, folder: str) -> None:
        """verl's async modes checkpoint the prompts still in flight (TransferQueue) and re-issue them
        on resume: their dataset rows are saved too, so the prompt source hears their outcomes."""
        if self.trainer_mode == "sync":
            return
        save_state(callback_state_path(folder, PROMPT_ROWS), {"rows": dict(self.prompt_rows)})

    def _restore_inflight_prompt_rows(self) -> None:
        if self.resumed_from is None or self.trainer_mode == "sync":
            return
        path, saved = self._checkpointed_state(PROMPT_ROWS, "dataset rows of its in-flight prompts (their outcomes)")
        rows = saved["rows"]
        self.prompt_rows.update({uid: int(row) for uid, row in rows.items()})
        print(f"[reasonrl] {PROMPT_ROWS}: {len(rows)} in-flight prompts' rows restored from {path}", flush=True)

    def _save_kept_groups(self, folder: str) -> None:
        """Finished groups kept across steps (staleness-bounded reuse) live in verl's TransferQueue,
        which verl checkpoints only in its async modes: saved here with TransferQueue's own
        ``save_checkpoint`` into the folder verl's async modes use, with their dataset rows."""
        buffer = self.reporting_buffer
        if buffer is None or not buffer.keeps_groups:
            return
        count, kept_digest = buffer.kept_groups_digest()
        uids = sorted(buffer.finished_keys["train"])
        tq.save_checkpoint(os.path.join(folder, TQ_FOLDER), metadata={"global_steps": self.global_steps})
        rows = {uid: self.prompt_rows[uid] for uid in uids if uid in self.prompt_rows}
        save_state(callback_state_path(folder, KEPT_GROUPS), {"rows": rows, "groups": count, "sha256": kept_digest})
        print(
            f"[reasonrl] {KEPT_GROUPS}: {count} groups saved at step {self.global_steps} (sha256 {kept_digest})",
            flush=True,
        )

    def _restore_kept_groups(self) -> None:
        buffer = self.reporting_buffer
        if self.resumed_from is None or buffer is None or not buffer.keeps_groups:
            return
        path, saved = self._checkpointed_state(
            KEPT_GROUPS, "groups the rollout schedule kept across steps (written by a run whose schedule kept none?)"
        )
        tq.load_checkpoint(os.path.join(self.resumed_from, TQ_FOLDER))
        self.prompt_rows.update({uid: int(row) for uid, row in saved["rows"].items()})
        count, kept_digest = buffer.kept_groups_digest()
        if (count, kept_digest) != (int(saved["groups"]), saved["sha256"]):
            raise RuntimeError(
                f"{self.resumed_from}: TransferQueue restored {count} kept groups (sha256 {kept_digest}), the "
                f"checkpoint saved {saved['groups']} (sha256 {saved['sha256']})"
            )
        print(f"[reasonrl] {KEPT_GROUPS}: {count} groups restored from {path} (sha256 {kept_digest})", flush=True)

    def _checkpointed_state(self, name: str, what: str) -> tuple[str, dict]:
        """(path, state) of reasonrl's ``name`` in the checkpoint resumed from; a missing file stops
        the run: resuming without ``what`` would silently drop it. A file that differs from the
        sha256 its step's manifest recorded, or cannot be read, raises ``CorruptCheckpoint`` naming it."""
        path = callback_state_path(self.resumed_from, name)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: the checkpoint has no {what}; resuming without it would silently drop it")
        return path, load_checkpointed_state(path)

    def _load_checkpoint(self):
        super()._load_checkpoint()
        self.resumed_from = None
        if self.global_steps > 0:
            if self.config.trainer.resume_mode == "resume_path":
                folder = self.config.trainer.resume_from_path
            else:
                folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
            self.resumed_from = os.path.abspath(folder)

    def _restore_callback_states(self) -> None:
        if self.resumed_from is None:
            return
        for name, callback in self.reasonrl_callbacks:
            if not isinstance(callback, CheckpointedState):
                continue
            path, state = self._checkpointed_state(name, f"state for reasonrl callback {name!r}")
            callback.load_state_dict(state)
            print(f"[reasonrl] {name}: state restored from {path} (sha256 {digest(callback.state_dict())})", flush=True)


class ReasonrlSyncTrainer(ReasonrlTrainerMixin, PPOTrainerSync):
    """Trainer mode ``reasonrl_sync``: verl's ``PPOTrainerSync`` with reasonrl's plugin callbacks."""

    VERL_MODE = "sync"


class ReasonrlColocateAsyncTrainer(ReasonrlTrainerMixin, PPOTrainerColocateAsync):
    """Trainer mode ``reasonrl_colocate_async``: verl's ``PPOTrainerColocateAsync`` (partial rollout
    across weight updates, ``trainer.v1.colocate_async.num_warmup_batches``) with the same callbacks."""

    VERL_MODE = "colocate_async"


class ReasonrlSeparateAsyncTrainer(ReasonrlTrainerMixin, PPOTrainerSeparateAsync):
    """Trainer mode ``reasonrl_separate_async``: verl's ``PPOTrainerSeparateAsync`` (standalone generation
    replicas, ``trainer.v1.separate_async.*``, a non-naive checkpoint engine) with the same callbacks."""

    VERL_MODE = "separate_async"
