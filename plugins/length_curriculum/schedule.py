"""Response-length curriculum: the generation limit grows in stages (framework-free core).

LongCat-Flash-Thinking §3.4.1 (code RL): the context grows 48K → 56K → 64K, "stepped up when
the 90th percentile of output lengths approaches the current limit". MiMo-7B-RL-0530 §3.6:
32K → 38K → 48K. Written as a rule over each training step's response lengths ℓ_1..ℓ_N:

    q_t   = Quantile_q(ℓ_1, …, ℓ_N)                     (q = 0.9)
    hit_t = q_t ≥ f · L_k                               (L_k: the current stage's limit)
    k    ← k + 1  when hit held for `patience` consecutive steps and k < K − 1

``f`` (``trigger_fraction``) is this project's reading of "approaches": the report gives no
number; 0.9 is an assumption. ``patience`` keeps one noisy step from jumping a stage (the
count restarts below the trigger and at each step-up). Responses are generated with the cap
L_k, so ℓ ≤ L_k and q_t ≤ L_k: f must be ≤ 1.

No upstream import here: the verl adapters are ``verl_callback.py`` and ``verl_request.py``.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np


def check_stages(stages: Sequence[int]) -> tuple[int, ...]:
    """``stages`` as a tuple of ints ≥ 1, strictly increasing (ValueError otherwise)."""
    values = list(stages)
    if not values:
        raise ValueError("stages must name at least one limit")
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1 for v in values):
        raise ValueError(f"stages must be token counts >= 1, got {values}")
    if any(b <= a for a, b in zip(values, values[1:])):
        raise ValueError(f"stages must be strictly increasing, got {values}")
    return tuple(int(v) for v in values)


def cap_sampling_params(sampling_params: dict[str, Any], limit: Any, response_length: int) -> dict[str, Any]:
    """The request's sampling parameters capped at the curriculum's ``limit`` (``max_tokens``),
    never above the configured ``response_length``; unchanged (the same dict) when ``limit`` is
    None, i.e. for requests that carry no limit (validation)."""
    if limit is None:
        return sampling_params
    limit = int(limit)
    if limit < 1:
        raise ValueError(f"response limit must be >= 1 token, got {limit}")
    return {**sampling_params, "max_tokens": min(limit, int(response_length))}


class LengthCurriculum:
    """Which stage's limit is in force, moved up by :meth:`observe` (state: stage, streak)."""

    def __init__(
        self,
        stages: Sequence[int],
        quantile: float = 0.9,
        trigger_fraction: float = 0.9,
        patience_steps: int = 1,
    ) -> None:
        self.stages = check_stages(stages)
        if not 0.0 < quantile <= 1.0:
            raise ValueError(f"quantile must be in (0, 1], got {quantile}")
        if not 0.0 < trigger_fraction <= 1.0:
            raise ValueError(f"trigger_fraction must be in (0, 1], got {trigger_fraction}")
        if int(patience_steps) < 1:
            raise ValueError(f"patience_steps must be >= 1, got {patience_steps}")
        self.quantile = float(quantile)
        self.trigger_fraction = float(trigger_fraction)
        self.patience_steps = int(patience_steps)
        self.stage = 0
        self.streak = 0
        self.last_quantile_length = math.nan

    @property
    def limit(self) -> int:
        """The response-length cap in force (tokens)."""
        return self.stages[self.stage]

    @property
    def trigger(self) -> float:
        """The quantile length at or above which a step counts toward the next stage."""
        return self.trigger_fraction * self.limit

    @property
    def at_last_stage(self) -> bool:
        return self.stage == len(self.stages) - 1

    def quantile_length(self, lengths: Iterable[float]) -> float:
        """The q-quantile of ``lengths`` (numpy's default linear interpolation), NaN when empty."""
        values = np.asarray(list(lengths), dtype=np.float64)
        return float(np.quantile(values, self.quantile)) if values.size else math.nan

    def observe(self, lengths: Iterable[float]) -> bool:
        """Take one training step's response lengths; True when the limit stepped up."""
        q = self.quantile_length(lengths)
        self.last_quantile_length = q
        if math.isnan(q) or self.at_last_stage:
            return False
        self.streak = self.streak + 1 if q >= self.trigger else 0
        if self.streak < self.patience_steps:
            return False
        self.stage += 1
        self.streak = 0
        return True

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "streak": self.streak,
            "limit": self.limit,
            "stages": np.asarray(self.stages, dtype=np.int64),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore; with the same stages exactly, with changed stages at the largest stage not
        above the saved limit (the streak then restarts)."""
        saved = tuple(int(v) for v in np.asarray(state["stages"]).reshape(-1))
        if saved == self.stages:
            self.stage, self.streak = int(state["stage"]), int(state["streak"])
            return
        limit = int(state["limit"])
        self.stage = max([i for i, v in enumerate(self.stages) if v <= limit], default=0)
        self.streak = 0
