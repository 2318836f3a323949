"""verl adapter: the ``length_curriculum`` callback of trainer mode ``reasonrl_sync``.

- ``batch_fields(trainer)``: every training batch (each step's batch and each DAPO refill; not
  validation) carries the current limit as ``reasonrl_response_limit``; the plugin's request
  transform in agent loop ``reasonrl`` caps the batch's requests at it (``verl_request.py``);
- ``before_advantage``: the step's response lengths (verl's per-sample ``response_len`` tags,
  padding samples left out — the lengths the responses were generated to, untouched by any
  mask another callback rewrites) go to :meth:`LengthCurriculum.observe`; a step-up applies
  from the next batch on. Logged: ``length_curriculum/limit`` and ``/stage`` (in force for this
  step's responses; stage counted from 0), ``/quantile_length``, ``/trigger`` (f · limit),
  ``/stepped`` (1 when the next batch gets the next stage);
- ``state_dict``/``load_state_dict``: stage and streak, saved in verl's checkpoint, so a
  resumed run keeps its limit.
"""

from __future__ import annotations

from typing import Any

from reasonrl.callbacks import CheckpointedState, StepCallback
from reasonrl.plugins.length_curriculum.config import LIMIT_FIELD, LengthCurriculumConfig
from reasonrl.plugins.length_curriculum.schedule import LengthCurriculum
from reasonrl.request_transforms import AGENT_LOOP

PREFIX = "length_curriculum"


def check_capped(lengths: list[int], limit: int) -> None:
    """Every response of the step was generated under a cap <= ``limit``: a longer one means the
    limit never reached the requests (a trainer without ``batch_fields``, or rows whose
    ``agent_name`` selects another agent loop) and the curriculum would only be a metric."""
    longest = max(lengths, default=0)
    if longest > limit:
        raise RuntimeError(
            f"length_curriculum: a response of {longest} tokens exceeds the current limit {limit}: the limit "
            f"did not reach generation. It needs trainer mode reasonrl_sync with batch_fields support and the agent "
            f"loop {AGENT_LOOP!r} (actor_rollout_ref.rollout.agent.default_agent_loop; no per-row agent_name)"
        )


class LengthCurriculumCallback(StepCallback, CheckpointedState):
    def __init__(self, curriculum: LengthCurriculum) -> None:
        self.curriculum = curriculum

    def batch_fields(self, trainer) -> dict[str, Any]:
        return {LIMIT_FIELD: self.curriculum.limit}

    def observe(self, lengths: list[int], metrics: dict) -> bool:
        """One step's lengths into the curriculum; its metrics into ``metrics``."""
        c = self.curriculum
        limit, stage, trigger = c.limit, c.stage, c.trigger
        stepped = c.observe(lengths)
        metrics[f"{PREFIX}/limit"] = float(limit)
        metrics[f"{PREFIX}/stage"] = float(stage)
        metrics[f"{PREFIX}/trigger"] = float(trigger)
        metrics[f"{PREFIX}/quantile_length"] = c.last_quantile_length
        metrics[f"{PREFIX}/stepped"] = float(stepped)
        if stepped:
            print(
                f"[reasonrl] length_curriculum: q{c.quantile:g} of response lengths "
                f"{c.last_quantile_length:.1f} >= {trigger:.1f}: limit {limit} -> {c.limit}",
                flush=True,
            )
        return stepped

    def before_advantage(self, trainer, batch, metrics: dict) -> None:
        from reasonrl.plugins.length_curriculum.compat import response_lengths

        lengths = response_lengths(batch)
        check_capped(lengths, self.curriculum.limit)
        self.observe(lengths, metrics)

    def state_dict(self) -> dict[str, Any]:
        return self.curriculum.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.curriculum.load_state_dict(state)


def build(config: Any) -> LengthCurriculumCallback | None:
    """The callback for runs whose ``reasonrl.length_curriculum.stages`` is set."""
    from reasonrl.plugins.length_curriculum.compat import AGENT_LOOP_CAP
    from reasonrl.plugins.length_curriculum.config import settings_from

    settings: LengthCurriculumConfig = settings_from(config)
    if not settings.stages:
        return None
    AGENT_LOOP_CAP.require()
    return LengthCurriculumCallback(settings.curriculum())
