"""Knobs at ``reasonrl.length_curriculum``, validated before any work.

The option files (``+reasonrl/length_curriculum=longcat_code`` / ``=mimo_0530``, in
``hydra_configs/reasonrl/length_curriculum/``) set them and select the capped agent loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from reasonrl.config import ConfigError, group_settings, knob
from reasonrl.contracts import ConfigGroup
from reasonrl.plugins.length_curriculum.schedule import LengthCurriculum, check_stages

KEY = "reasonrl.length_curriculum"
#: The batch field that carries the current limit from the trainer to the request transform.
LIMIT_FIELD = "reasonrl_response_limit"


@dataclass
class LengthCurriculumConfig:
    """``reasonrl.length_curriculum``: the stages and the step-up rule (see schedule.py)."""

    stages: list = knob(
        [],
        help="response-length limits in tokens, strictly increasing, each >= 1; the last one equals "
        "data.max_response_length (the run is configured at the last stage); empty: curriculum off",
    )
    quantile: float = knob(
        0.9,
        help="q: the quantile of a step's response lengths compared with the limit",
        low=0.0,
        high=1.0,
        low_open=True,
    )
    trigger_fraction: float = knob(
        0.9,
        help="f: step up when Quantile_q(lengths) >= f · limit (the report's 'approaches'; 0.9 is an assumption)",
        low=0.0,
        high=1.0,
        low_open=True,
    )
    patience_steps: int = knob(
        1, help="consecutive training steps at or above the trigger before the limit steps up", low=1
    )

    def check(self) -> None:
        if not self.stages:
            return
        try:
            check_stages(self.stages)
        except ValueError as exc:
            raise ConfigError(f"{KEY}.stages", str(exc)) from exc

    def curriculum(self) -> LengthCurriculum:
        return LengthCurriculum(self.stages, self.quantile, self.trigger_fraction, self.patience_steps)


LENGTH_CURRICULUM_GROUP = ConfigGroup(
    "length_curriculum",
    LengthCurriculumConfig,
    "response-length curriculum: the generation limit steps up when the q-quantile of lengths nears it",
)


def settings_from(config) -> LengthCurriculumConfig:
    """The validated ``reasonrl.length_curriculum`` section of a run config (defaults when absent)."""
    return group_settings(config, LENGTH_CURRICULUM_GROUP)
