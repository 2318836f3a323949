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
    #: other plugins this one calls (by entry-point name): checked by the manager at discovery
    requires: tuple[str, ...] = ()


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
    """Per-step code a plugin runs inside reasonrl's verl trainer modes ``reasonrl_sync`` and
    ``reasonrl_colocate_async`` (verl's trainers plus these callbacks).

    ``build(config)`` is called once in verl's TaskRunner with the run config (upstream imports
    belong inside it) and returns ``None`` when the run does not need the callback, else a
    :class:`reasonrl.callbacks.StepCallback` — the typed contract, every method a no-op by
    default (``on_init_end``, ``batch_fields``, ``on_groups_finished``, ``before_advantage``,
    ``before_actor_update``, ``actor_loss_term``). Roles are base classes the trainer finds by
    type: ``PromptSource`` and ``RolloutSchedule`` (one per run), ``GroupCarrier`` (partial
    rollout's held groups), ``CheckpointedState`` (saved in ``global_step_<n>/reasonrl/<name>.npz``
    before verl marks the checkpoint complete, restored after ``on_init_end``), and the
    ``ActorLossTerm`` a callback adds to verl's ``ppo_loss`` (composed into one loss,
    ``reasonrl/bridges/verl_actor_loss.py``; no callback replaces the loss). See
    ``reasonrl/callbacks.py`` for each method's arguments.
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
    (a schedule that keeps groups across steps: an earlier view already counted them)."""

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
