"""Knobs at ``reasonrl.objective``, named as in the reports, validated before any work.

The option files (``+reasonrl/objective=longcat`` / ``=kimi_mirror_descent``, in
``hydra_configs/reasonrl/objective/``) map them onto verl's own keys by interpolation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from reasonrl.config import ConfigError, knob
from reasonrl.contracts import ConfigGroup
from reasonrl.plugins.objectives.schedule import SHAPES, EpsSchedule

OBJECTIVES = ("longcat", "kimi_mirror_descent")


@dataclass
class ObjectiveConfig:
    """``reasonrl.objective``: which objective and its hyper-parameters (LongCat §3.2.1, Kimi k1.5 §2.3.2)."""

    name: Optional[str] = knob(
        None,
        help="the objective the option file switched on (verl's policy_loss.loss_mode)",
        choices=(None, *OBJECTIVES),
    )
    # LongCat §3.2.1 triplet clipping, truncated IS, G·T_max
    eps_neg_low: float = knob(
        0.2,
        help="ε_neg_low: lower clip bound of the ratio, 1 − ε (→ actor.clip_ratio_low)",
        low=0.0,
        high=1.0,
        low_open=True,
        high_open=True,
    )
    eps_pos_high: float = knob(
        0.28,
        help="ε_pos_high: upper clip bound, 1 + ε, clip-higher (→ actor.clip_ratio_high); start of the schedule",
        low=0.0,
        high=1.0,
        low_open=True,
        high_open=True,
    )
    eps_neg_high: float = knob(
        3.0, help="ε_neg_high: dual-clip floor ε·A for A < 0 (→ actor.clip_ratio_c)", low=1.0, low_open=True
    )
    tis_cap: float = knob(
        2.0,
        help="C: truncated importance-sampling cap, min(exp(old − rollout), C) (→ algorithm.rollout_correction.rollout_is_threshold)",
        low=1.0,
    )
    t_max: int = knob(
        1,
        help="T_max: constant denominator G·T_max (→ actor.loss_scale_factor); the option file sets data.max_response_length",
        low=1,
    )
    # LongCat: ε_pos_high schedule
    eps_pos_high_schedule: str = knob(
        "constant", help="shape of the ε_pos_high schedule over training steps", choices=SHAPES
    )
    eps_pos_high_end: Optional[float] = knob(
        None, help="linear: ε_pos_high at step eps_pos_high_steps", low=0.0, high=1.0, low_open=True, high_open=True
    )
    eps_pos_high_steps: int = knob(1, help="linear: steps from eps_pos_high to eps_pos_high_end", low=1)
    eps_pos_high_milestones: list = knob(
        [], help="step: training steps at which ε_pos_high is multiplied by eps_pos_high_factor"
    )
    eps_pos_high_factor: float = knob(1.0, help="step: multiplier applied at each milestone", low=0.0, low_open=True)
    # TIS sampling-bias guard
    allow_biased_tis: bool = knob(
        False, help="run truncated IS although rollout sampling uses top_p < 1 or top_k > 0 (biased; see README)"
    )
    # Kimi k1.5 policy mirror descent
    tau: float = knob(
        0.1,
        help="τ: weight of the squared log-ratio to the iteration's policy (Kimi k1.5 §2; the report gives no value)",
        low=0.0,
        low_open=True,
    )
    kimi_level: str = knob(
        "sequence",
        help="log π(y) of a whole response (sequence) or a per-token penalty (token)",
        choices=("sequence", "token"),
    )

    def schedule(self) -> EpsSchedule:
        return EpsSchedule(
            shape=self.eps_pos_high_schedule,
            start=self.eps_pos_high,
            end=self.eps_pos_high if self.eps_pos_high_end is None else self.eps_pos_high_end,
            steps=self.eps_pos_high_steps,
            milestones=tuple(int(m) for m in self.eps_pos_high_milestones),
            factor=self.eps_pos_high_factor,
        )

    def check(self) -> None:
        prefix = "reasonrl.objective"
        if self.eps_pos_high_schedule == "linear" and self.eps_pos_high_end is None:
            raise ConfigError(f"{prefix}.eps_pos_high_end", "is required for a linear schedule: a value in (0.0, 1.0)")
        milestones = self.eps_pos_high_milestones
        if not all(
            isinstance(m, int) and not isinstance(m, bool) and m >= 1 for m in milestones
        ) or milestones != sorted(set(milestones)):
            raise ConfigError(
                f"{prefix}.eps_pos_high_milestones",
                f"must be strictly increasing training steps >= 1, got {milestones}",
            )
        if self.eps_pos_high_schedule == "step":
            # factor > 0 keeps every value positive; the largest is the first or the last.
            highest = max(self.eps_pos_high, self.eps_pos_high * self.eps_pos_high_factor ** len(milestones))
            if highest >= 1.0:
                raise ConfigError(
                    f"{prefix}.eps_pos_high_factor",
                    f"= {self.eps_pos_high_factor} takes ε_pos_high to {highest:.4g} after {len(milestones)} milestones: allowed (0.0, 1.0)",
                )


OBJECTIVE_GROUP = ConfigGroup(
    "objective",
    ObjectiveConfig,
    "policy objectives: LongCat triplet clipping + TIS + G·T_max, ε_pos_high schedule, Kimi mirror descent",
)
