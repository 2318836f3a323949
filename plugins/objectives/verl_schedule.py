"""verl adapter: the ε_pos_high schedule, applied every training step.

verl's loss runs in the actor workers and reads its clip bounds from a frozen actor config,
so a per-step value needs a path from the trainer to the loss. It goes through reasonrl's
trainer mode ``reasonrl_sync`` (a :class:`~reasonrl.contracts.TrainerCallback`) and its one
composed actor loss (``reasonrl/bridges/verl_actor_loss.py``) — no patch, and no loss of its own:

- before each actor update the callback puts the step's ε_pos_high into the batch's
  ``extra_info`` (verl hands those entries to the loss with the data) and logs it as
  ``actor/eps_pos_high``;
- its actor-loss term (:class:`EpsPosHighTerm`) copies that value into
  ``policy_loss.eps_pos_high`` (read by ``longcat``) before verl's ``ppo_loss`` runs, beside
  whatever other terms the run composes (trained MTP layers, ...).

The step is verl's ``global_steps``, restored from checkpoints, so a resumed run continues
the schedule where it stopped.
"""

from __future__ import annotations

from typing import Any

from reasonrl.callbacks import ActorLossTerm, StepCallback
from reasonrl.plugins.objectives.schedule import EpsSchedule

STEP_VALUE_KEY = "reasonrl_eps_pos_high"


class EpsPosHighTerm(ActorLossTerm):
    """Actor-loss term: ``policy_loss.eps_pos_high`` = the step's scheduled value (from the batch)."""

    def adjust_config(self, config, data) -> None:
        from verl.utils import tensordict_utils as tu

        value = tu.get_non_tensor_data(data, STEP_VALUE_KEY, None)
        if value is not None:
            config.policy_loss.eps_pos_high = float(value)


class EpsScheduleCallback(StepCallback):
    def __init__(self, schedule: EpsSchedule) -> None:
        self.schedule = schedule

    def actor_loss_term(self) -> EpsPosHighTerm:
        return EpsPosHighTerm()

    def before_actor_update(self, trainer, extra_info: dict, metrics: dict) -> None:
        value = self.schedule.value(trainer.global_steps)
        extra_info[STEP_VALUE_KEY] = value
        metrics["actor/eps_pos_high"] = value


def build(config: Any) -> EpsScheduleCallback | None:
    """The callback for runs whose ``reasonrl.objective`` has a non-constant schedule."""
    from omegaconf import OmegaConf

    from reasonrl.config import validate_group
    from reasonrl.plugins.objectives.config import OBJECTIVE_GROUP

    section = OmegaConf.select(config, "reasonrl.objective")
    if section is None:
        return None
    schedule = validate_group(OBJECTIVE_GROUP, OmegaConf.to_container(section, resolve=True)).schedule()
    return None if schedule.is_constant() else EpsScheduleCallback(schedule)
