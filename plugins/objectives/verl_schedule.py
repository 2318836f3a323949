"""verl adapter: the ε_pos_high schedule, applied every training step.

verl's loss runs in the actor workers and reads its clip bounds from a frozen actor config,
so a per-step value needs a path from the trainer to the loss. It goes through reasonrl's
trainer mode ``reasonrl_sync`` (a :class:`~reasonrl.contracts.TrainerCallback`) and the
actor workers' own ``set_loss_fn`` — no patch:

- before each actor update the callback puts the step's ε_pos_high into the batch's
  ``extra_info`` (verl hands those entries to the loss with the data) and logs it as
  ``actor/eps_pos_high``;
- :class:`ScheduledPPOLoss`, installed once in the actor workers, wraps verl's own
  ``ppo_loss`` and copies that value into ``policy_loss.eps_pos_high`` (read by ``longcat``).

The step is verl's ``global_steps``, restored from checkpoints, so a resumed run continues
the schedule where it stopped.
"""

from __future__ import annotations

from typing import Any

from reasonrl.plugins.objectives.schedule import EpsSchedule

STEP_VALUE_KEY = "reasonrl_eps_pos_high"


class ScheduledPPOLoss:
    """verl's ``ppo_loss`` with ``policy_loss.eps_pos_high`` taken from the batch.

    Holds the actor config (OmegaConf) and converts it the way verl's worker does
    (``omega_conf_to_dataclass``), in the worker, on first use.
    """

    def __init__(self, actor_config: Any) -> None:
        self.actor_config = actor_config
        self._config = None

    def __call__(self, model_output, data, dp_group=None):
        from verl.utils import tensordict_utils as tu
        from verl.utils.config import omega_conf_to_dataclass
        from verl.workers.utils.losses import ppo_loss

        if self._config is None:
            self._config = omega_conf_to_dataclass(self.actor_config)
        value = tu.get_non_tensor_data(data, STEP_VALUE_KEY, None)
        if value is not None:
            self._config.policy_loss.eps_pos_high = float(value)
        return ppo_loss(self._config, model_output, data, dp_group)


class EpsScheduleCallback:
    replaces_actor_loss = True

    def __init__(self, schedule: EpsSchedule) -> None:
        self.schedule = schedule

    def on_init_end(self, trainer) -> None:
        trainer.actor_rollout_wg.set_loss_fn(ScheduledPPOLoss(trainer.config.actor_rollout_ref.actor))

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
