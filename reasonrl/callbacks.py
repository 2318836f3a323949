"""The typed contract of reasonrl's trainer callbacks: base classes with no-op defaults.

A plugin's :class:`~reasonrl.contracts.TrainerCallback` factory builds one object per run; it
subclasses :class:`StepCallback` (every per-step method a no-op) and overrides what it needs, as
verl's ``CheckpointCallback`` does. Roles a run holds once, or that change how a step is built,
are their own base classes, so the trainer finds them by type instead of probing for methods:

- :class:`PromptSource` — chooses the training prompts (at most one per run);
- :class:`RolloutSchedule` — streams a step's rollout: launches and early termination (at most one);
- :class:`GroupCarrier` — holds finished groups back and sends them out again (partial rollout);
- :class:`CheckpointedState` — state saved with verl's checkpoint and restored on resume;
- :class:`ActorLossTerm` — what a callback adds to verl's actor loss (``StepCallback.actor_loss_term``).

Every method takes ``**kwargs`` so that a later version of the trainer may pass more.
"""

from __future__ import annotations

from typing import Any, Callable

#: per step and callback, the seconds the trainer spent in its methods (logged as
#: ``reasonrl/timing_s/callback/<name>``: what each technique costs a step)
CALLBACK_TIMING = "reasonrl/timing_s/callback/"


class StepCallback:
    """Per-step code inside trainer modes ``reasonrl_sync`` / ``reasonrl_colocate_async``."""

    def on_init_end(self, trainer: Any, **kwargs: Any) -> None:
        """After verl's trainer finished initialising (workers up)."""

    def batch_fields(self, trainer: Any, **kwargs: Any) -> dict[str, Any]:
        """Batch-level fields put on every training batch and DAPO refill (never validation);
        verl's agent loops receive them as ``run(**kwargs)``."""
        return {}

    def on_groups_finished(self, trainer: Any, groups: list, **kwargs: Any) -> None:
        """Finished prompt groups as verl's replay buffer resolves them, trained or not
        (``FinishedGroup`` records; needs reasonrl's ``ReportingReplayBuffer``)."""

    def before_advantage(self, trainer: Any, batch: Any, metrics: dict, **kwargs: Any) -> None:
        """Each step after rewards, before verl computes advantages (``batch``: verl's
        ``KVBatchMeta``; read and write fields through TransferQueue)."""

    def before_actor_update(self, trainer: Any, extra_info: dict, metrics: dict, **kwargs: Any) -> None:
        """Each step before the actor update: ``extra_info`` reaches the actor's loss with the
        batch; ``metrics`` are logged for the step."""

    def actor_loss_term(self, **kwargs: Any) -> ActorLossTerm | None:
        """What this callback adds to verl's actor loss (None: nothing)."""
        return None


class CheckpointedState:
    """State saved in each step's checkpoint (``global_step_<n>/reasonrl/<name>.npz``) and restored
    on resume; a resume without it stops the run."""

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise NotImplementedError


class PromptSource(StepCallback):
    """Chooses the dataset rows to roll out instead of verl's dataloader (one per run)."""

    role = "choose the prompts"

    def next_prompts(self, trainer: Any, count: int, refill: bool, **kwargs: Any) -> list[int]:
        """``count`` rows; ``refill``: topping up a batch after verl's DAPO filter evicted groups."""
        raise NotImplementedError


class GroupCarrier(StepCallback):
    """Holds finished groups back from training and sends them out again first (partial rollout).
    Needs reasonrl's replay buffer and a :class:`PromptSource`."""

    #: the per-row string fields of a carried group (every training batch carries them, "" elsewhere)
    carried_fields: tuple[str, ...] = ()

    def holds_group(self, trainer: Any, extra_fields: list[dict], **kwargs: Any) -> bool:
        """Asked once per finished group with its responses' ``reasonrl_*`` extra fields."""
        return False

    def carried_prompts(self, trainer: Any, count: int, refill: bool, **kwargs: Any) -> list[tuple[int, dict]]:
        """Up to ``count`` held groups to send out again: ``(row, {field: str})``."""
        return []


class RolloutSchedule(StepCallback):
    """A streaming rollout schedule for the step (one per run; needs reasonrl's replay buffer): at
    each poll the buffer passes a ``RolloutView`` and launches ``prompts_to_launch`` new prompts;
    once ``early_termination`` returns uids, the step trains those and aborts the rest."""

    role = "schedule the rollout"
    #: whether the step's surplus finished valid groups stay in the buffer for later batches
    #: (then ``split_kept`` decides at each step's start which of them the batch reuses)
    keeps_groups: bool = False

    def prompts_to_launch(self, trainer: Any, view: Any, **kwargs: Any) -> int:
        raise NotImplementedError

    def early_termination(self, trainer: Any, view: Any, **kwargs: Any) -> list[str] | None:
        raise NotImplementedError

    def split_kept(
        self,
        kept: list[str],
        trainer_version: int,
        batch_size: int,
        version_of: Callable[[str], int],
        launch_of: Callable[[str], int],
        **kwargs: Any,
    ) -> tuple[list[str], list[str], list[str]]:
        """With ``keeps_groups``, at a step's start: the kept groups (uids) this batch reuses (in
        order), those that wait, and those the schedule drops (cleared, reported untrained). The
        schedule owns the rule; the replay buffer applies it to verl's version tags."""
        raise NotImplementedError

    def order_batch(self, uids: list[str], step: int, **kwargs: Any) -> list[str]:
        """The trained groups in the order the batch holds them (verl keeps the buffer's order)."""
        return uids


class ActorLossTerm:
    """A term of the actor's loss, pickled into verl's actor workers (``set_loss_fn``)."""

    def on_worker(self, **kwargs: Any) -> None:
        """Once in each actor worker, after unpickling."""

    def adjust_config(self, config: Any, data: Any, **kwargs: Any) -> None:
        """Change verl's actor config for this micro-batch before verl's loss (e.g. a scheduled ε)."""

    def loss(self, config: Any, model_output: Any, data: Any, metrics: dict, **kwargs: Any) -> tuple[Any, dict] | None:
        """``(extra loss, extra metrics)`` added to verl's loss, or None: nothing added."""
        return None


def single(callbacks: list[tuple[str, Any]], role: type) -> tuple[str, Any] | None:
    """``(name, callback)`` of the one callback of ``role`` (a :class:`PromptSource` or a
    :class:`RolloutSchedule`), or None; several in one run are refused, naming them."""
    found = [(name, callback) for name, callback in callbacks if isinstance(callback, role)]
    if len(found) > 1:
        raise RuntimeError(f"reasonrl callbacks {[name for name, _ in found]} each want to {role.role}: enable one")
    return found[0] if found else None
