"""Plain data records that plugins hand back from their hooks (see :mod:`reasonrl.hookspecs`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable

UPSTREAMS = ("verl", "vllm", "megatron")


@dataclass(frozen=True)
class PluginInfo:
    """Who a plugin is. ``reports`` cites the report sections it implements."""

    name: str
    summary: str
    reports: tuple[str, ...] = ()


@dataclass(frozen=True)
class Registration:
    """One thing registered with an upstream registry.

    ``apply`` performs the registration (the upstream import happens inside it). It must be
    idempotent: bridges may run it in many processes and, in one process, more than once.
    ``when`` (optional, cheap, no upstream import needed) returns None where the registration
    applies in this process, else the reason it does not (shown by ``reasonrl plugins``): e.g. a
    replacement of an upstream class made only for runs that asked for it.
    """

    upstream: str
    kind: str
    name: str
    apply: Callable[[], Any]
    description: str = ""
    when: Callable[[], str | None] | None = None

    def skip_reason(self) -> str | None:
        return self.when() if self.when is not None else None

    def __post_init__(self) -> None:
        if self.upstream not in UPSTREAMS:
            raise ValueError(f"Registration.upstream must be one of {UPSTREAMS}, got {self.upstream!r}")
        if not self.kind or not self.name:
            raise ValueError("Registration needs a non-empty kind and name")
        if not callable(self.apply):
            raise TypeError(f"Registration {self.kind}:{self.name}: apply must be callable")


@dataclass(frozen=True)
class ConfigGroup:
    """The knobs of one plugin, living at ``reasonrl.<name>`` in the composed config.

    ``schema`` is a dataclass whose fields use :func:`reasonrl.config.knob`; its optional
    ``check(self)`` method raises :class:`reasonrl.config.ConfigError` for cross-field rules.
    """

    name: str
    schema: type
    summary: str = ""


@dataclass(frozen=True)
class DatasetColumn:
    """A column the run reads from every row of ``data.train_files`` / ``data.val_files``.

    ``needed_by`` is the config key (or option) that makes the run read it, named in the
    start-up error; with ``or_extra_info`` a key of the row's ``extra_info`` also serves.
    """

    name: str
    needed_by: str
    or_extra_info: bool = False
    train_only: bool = False


@dataclass(frozen=True)
class CliCommand:
    """A ``reasonrl <name>`` sub-command: ``configure`` adds arguments, ``run`` returns an exit code."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    aliases: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class TrainerCallback:
    """Per-step code a plugin runs inside reasonrl's verl trainer mode ``reasonrl_sync``
    (verl's synchronous trainer plus these callbacks; ``trainer.v1.trainer_mode=reasonrl_sync``).

    ``build(config)`` is called once in verl's TaskRunner with the run config (upstream
    imports belong inside it) and returns ``None`` when the run does not need the callback,
    else an object with any of these methods:

    - ``on_init_end(trainer)``: after verl's trainer finished initialising (workers up);
    - ``before_advantage(trainer, batch, metrics)``: each step, after rewards and before
      verl computes advantages; ``batch`` is verl's ``KVBatchMeta`` (the step's keys in the
      TransferQueue): a callback may read fields and write modified ones back (``rm_scores``,
      ``response_mask``/``loss_mask``) with ``transfer_queue.kv_batch_get``/``kv_batch_put``;
    - ``before_actor_update(trainer, extra_info, metrics)``: each step, before the actor
      update; entries added to ``extra_info`` reach the actor's loss with the batch, entries
      added to ``metrics`` are logged for the step;
    - ``next_prompts(trainer, count, refill) -> list[int]``: the training dataset rows to roll
      out next, instead of verl's dataloader (``refill``: topping up a batch after verl's DAPO
      filter evicted groups). At most one callback of a run may have it;
    - ``holds_group(trainer, extra_fields) -> bool``: asked once per finished prompt group with
      its responses' ``reasonrl_*`` extra fields; True holds the group back from training (verl
      refills its slot, the group is reported with ``held=True``), e.g. partial rollout's groups
      with an unfinished response;
    - ``carried_prompts(trainer, count, refill) -> list[(row, {field: str})]`` with ``carried_fields``
      (the field names): prompt groups to send out again before new prompts are drawn, each
      with per-row string fields its agent loop reads from ``run(**kwargs)`` (every training
      batch carries ``carried_fields``, ``""`` on the other rows);
    - ``batch_fields(trainer) -> dict[str, scalar]``: batch-level fields put on every training
      batch (each step and each DAPO refill, never validation); verl's agent loops receive them
      as ``run(**kwargs)`` (e.g. the length curriculum's per-request response limit);
    - ``on_groups_finished(trainer, groups)``: finished prompt groups as verl's replay buffer
      resolves them, trained or not (needs reasonrl's ``ReportingReplayBuffer`` as
      ``trainer.v1.sampler.custom_sampler``): ``FinishedGroup`` records with ``row`` (the
      dataset row), ``rewards``, ``reward_extra_info``, ``trained``, ``held`` and ``aborted`` (not
      outcomes: scorers skip them; ``outcome`` is False for both) and ``extra_fields`` (per response, its ``reasonrl_*`` extra fields);
    - ``prompts_to_launch(trainer, view) -> int`` and ``early_termination(trainer, view) -> list[str] |
      None``: a streaming rollout schedule for the step (needs reasonrl's ``ReportingReplayBuffer``;
      at most one callback of a run may have them). At each poll of the step's sampling the replay
      buffer passes a :class:`RolloutView` (the step's prompt groups in launch order, finished or
      not, valid or not) and launches the returned number of new prompts instead of verl's fixed
      refill credits; once ``early_termination`` returns uids (finished, valid groups), the buffer
      aborts every request still in flight, waits for them, resumes generation and trains exactly
      those groups — the unfinished ones are reported with ``aborted=True`` (not outcomes), the
      other finished ones as untrained surplus (e.g. MiMo's seamless rollout, FIFO early
      termination). A schedule with ``staleness`` (an int, policy versions; optional
      ``reuse_ratio``) keeps the surplus finished valid groups in the buffer instead: a later step
      trains up to ``reuse_ratio`` of its batch from them while they lag the trainer by at most
      ``staleness`` versions, and clears them past it (LongCat's DORA); kept groups travel in the
      checkpoint (TransferQueue's own ``save_checkpoint``);
    - ``actor_loss_term() -> term``: a term of the actor's loss (``adjust_config(config, data)``
      for per-step values on verl's loss config, ``loss(config, model_output, data, metrics)``
      for an additive, already weighted term, ``on_worker()``); the trainer composes every
      callback's term with verl's own ``ppo_loss`` into one loss
      (``reasonrl/bridges/verl_actor_loss.py``) — no callback replaces the loss;
    - ``state_dict()`` / ``load_state_dict(state)``: saved in verl's checkpoint folder
      (``global_step_<n>/reasonrl/<name>.npz``, numpy arrays and JSON scalars) before verl
      marks the checkpoint complete, restored after ``on_init_end`` on resume.
    """

    name: str
    build: Callable[[Any], Any]


#: Where reasonrl's replay buffer logs a streaming schedule's raw counts, per step
#: (``<prefix><fate>_tokens`` for each of :data:`TOKEN_FATES`, ``launched_prompts``, ``busy_s``, ...).
STREAM_METRICS = "training/stream/"
#: What became of a step's generated response tokens under a streaming schedule.
TOKEN_FATES = ("trained", "untrained", "aborted")


@dataclass(frozen=True)
class RolloutGroup:
    """One prompt group of a training step, as a streaming rollout schedule sees it."""

    uid: str
    finished: bool  # every response of the group came back
    valid: bool  # finished and trainable (dynamic sampling: its rewards differ)


@dataclass(frozen=True)
class RolloutView:
    """The step's sampling so far (``TrainerCallback.prompts_to_launch`` / ``early_termination``).

    ``groups``: in launch order, the groups that can still be trained or are still running (groups
    the DAPO filter evicted are gone: they count in ``invalid_finished``); ``batch_size``: groups the
    step trains; ``free_slots``: prompts that may still be launched (verl's in-flight bound);
    ``reused``: the first groups of ``groups``, finished in an earlier step and kept in the buffer
    (staleness-bounded reuse: an earlier view already counted them)."""

    groups: tuple[RolloutGroup, ...]
    batch_size: int
    invalid_finished: int
    free_slots: int
    reused: int = 0

    @property
    def valid_finished(self) -> int:
        return sum(group.valid for group in self.groups)

    @property
    def active(self) -> int:
        return sum(not group.finished for group in self.groups)
