"""The ε_pos_high schedule (LongCat §3.2.1 adjusts the clip-higher bound during STEM RL).

Three shapes over training steps (the trainer's global step, 1-based):

- ``constant``: ε(step) = start.
- ``linear``: from ``start`` at step 1 to ``end`` at ``steps``, constant afterwards.
- ``step``: ``start``, multiplied by ``factor`` at each step listed in ``milestones``
  (the value changes *at* the milestone step).

Pure Python; the verl adapter (``verl_trainer.py``) applies it each step.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

SHAPES = ("constant", "linear", "step")


@dataclass(frozen=True)
class EpsSchedule:
    shape: str = "constant"
    start: float = 0.28
    end: float = 0.28
    steps: int = 1
    milestones: tuple[int, ...] = field(default=())
    factor: float = 1.0

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"schedule shape must be one of {SHAPES}, got {self.shape!r}")
        if list(self.milestones) != sorted(set(self.milestones)):
            raise ValueError(f"milestones must be strictly increasing, got {list(self.milestones)}")

    def value(self, step: int) -> float:
        """ε_pos_high at training step ``step`` (steps before 1 count as 1)."""
        step = max(1, int(step))
        if self.shape == "constant":
            return self.start
        if self.shape == "linear":
            if self.steps <= 1:
                return self.end
            progress = min(1.0, (step - 1) / (self.steps - 1))
            return self.start + progress * (self.end - self.start)
        return self.start * self.factor ** bisect.bisect_right(self.milestones, step)

    def is_constant(self) -> bool:
        return self.shape == "constant"
