"""Reproducible long-tail response traces for the rollout simulator (``simulator.py``).

A trace fixes, for every prompt ``i`` and sample ``j`` of its group of ``G``, the response length
in tokens, whether it is correct (reward 1, else 0) and whether it loops. The distribution of
:func:`long_tail_trace`:

- per-prompt pass rate ``p_i ~ Beta(a, b)`` with ``a = mean_pass_rate·concentration`` and
  ``b = (1 − mean_pass_rate)·concentration``; the defaults give ``Beta(0.41, 0.59)``, U-shaped, so
  with ``G = 16`` about 9 % of the groups are all-correct and 21 % all-wrong (no signal: dynamic
  sampling drops them);
- ``correct_ij ~ Bernoulli(p_i)``;
- a wrong sample loops with probability ``looping_share / (1 − mean_pass_rate)`` (about
  ``looping_share`` of all samples): it runs to ``max_tokens`` and stays wrong;
- the others are log-normal: ``ln L ~ N(ln m, σ)`` for a correct sample, ``N(ln(m·wrong_longer), σ)``
  for a wrong one. ``σ`` and ``m`` are solved so that the two-part mixture (weights
  ``mean_pass_rate`` / ``1 − mean_pass_rate``) has median ``median_tokens`` and
  p99/median = ``p99_ratio`` (``σ ≈ 0.94`` for the defaults); lengths are rounded up to whole
  tokens and capped at ``max_tokens``; a capped response is truncated: wrong.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Trace:
    """``lengths`` / ``correct`` / ``looping``: arrays of shape (prompts, group size)."""

    lengths: np.ndarray
    correct: np.ndarray
    looping: np.ndarray | None = None
    max_tokens: int | None = None
    params: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        lengths = np.asarray(self.lengths, dtype=np.int64)
        if lengths.ndim != 2 or (lengths < 1).any():
            raise ValueError("lengths must be a (prompts, group size) array of positive token counts")
        correct = np.asarray(self.correct, dtype=bool)
        if correct.shape != lengths.shape:
            raise ValueError(f"correct {correct.shape} and lengths {lengths.shape} differ in shape")
        looping = np.zeros_like(correct) if self.looping is None else np.asarray(self.looping, dtype=bool)
        object.__setattr__(self, "lengths", lengths)
        object.__setattr__(self, "correct", correct)
        object.__setattr__(self, "looping", looping)

    @property
    def n_prompts(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def group_size(self) -> int:
        return int(self.lengths.shape[1])

    def group_valid(self) -> np.ndarray:
        """Per prompt: the group holds both a pass and a fail (dynamic sampling keeps it)."""
        passes = self.correct.sum(axis=1)
        return (passes > 0) & (passes < self.group_size)


def _normal_cdf(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def _mixture_quantile(q: float, sigma: float, shift: float, weight: float) -> float:
    """Quantile ``q`` of ``weight·N(0, σ) + (1 − weight)·N(shift, σ)`` (log lengths), by bisection."""
    low, high = -12.0 * sigma - 1.0, 12.0 * sigma + shift + 1.0
    for _ in range(100):
        mid = 0.5 * (low + high)
        cdf = weight * _normal_cdf(mid / sigma) + (1.0 - weight) * _normal_cdf((mid - shift) / sigma)
        low, high = (mid, high) if cdf < q else (low, mid)
    return 0.5 * (low + high)


def solve_lognormal(p99_ratio: float, wrong_longer: float, pass_rate: float) -> tuple[float, float]:
    """``(σ, median_shift)``: the log-normal σ whose correct/wrong mixture has p99/median =
    ``p99_ratio``, and ``ln(mixture median / correct median)``."""
    if p99_ratio <= 1.0 or wrong_longer < 1.0:
        raise ValueError(f"need p99_ratio > 1 and wrong_longer >= 1, got {p99_ratio}, {wrong_longer}")
    shift, target = math.log(wrong_longer), math.log(p99_ratio)

    def log_ratio(sigma: float) -> float:
        return _mixture_quantile(0.99, sigma, shift, pass_rate) - _mixture_quantile(0.5, sigma, shift, pass_rate)

    low, high = 1e-4, 5.0
    if log_ratio(low) > target:
        raise ValueError(f"p99_ratio {p99_ratio} is below what wrong_longer={wrong_longer} alone gives")
    for _ in range(60):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if log_ratio(mid) < target else (low, mid)
    sigma = 0.5 * (low + high)
    return sigma, _mixture_quantile(0.5, sigma, shift, pass_rate)


def long_tail_trace(
    n_prompts: int,
    group_size: int = 16,
    seed: int = 0,
    median_tokens: float = 3000.0,
    p99_ratio: float = 9.0,
    wrong_longer: float = 1.3,
    looping_share: float = 0.03,
    max_tokens: int = 32768,
    mean_pass_rate: float = 0.41,
    concentration: float = 1.0,
) -> Trace:
    """A reproducible long-tail trace (distribution in the module docstring)."""
    if not 0.0 < mean_pass_rate < 1.0 or concentration <= 0:
        raise ValueError(f"need 0 < mean_pass_rate < 1 and concentration > 0, got {mean_pass_rate}, {concentration}")
    if not 0.0 <= looping_share < 1.0 - mean_pass_rate:
        raise ValueError(f"looping_share must be in [0, 1 - mean_pass_rate), got {looping_share}")
    rng = np.random.default_rng(seed)
    a, b = mean_pass_rate * concentration, (1.0 - mean_pass_rate) * concentration
    pass_rates = rng.beta(a, b, size=n_prompts)
    shape = (n_prompts, group_size)
    correct = rng.random(shape) < pass_rates[:, None]
    looping = ~correct & (rng.random(shape) < looping_share / (1.0 - mean_pass_rate))
    sigma, median_shift = solve_lognormal(p99_ratio, wrong_longer, mean_pass_rate)
    log_median = math.log(median_tokens) - median_shift  # the correct answers' median
    log_lengths = log_median + sigma * rng.standard_normal(shape) + np.where(correct, 0.0, math.log(wrong_longer))
    lengths = np.minimum(np.ceil(np.exp(log_lengths)), max_tokens).astype(np.int64)
    lengths[looping] = max_tokens
    correct &= lengths < max_tokens  # truncated: no final answer
    params = {
        "beta_a": a,
        "beta_b": b,
        "sigma": sigma,
        "correct_median": math.exp(log_median),
        "wrong_median": math.exp(log_median) * wrong_longer,
        "pass_rates": pass_rates,
        "seed": seed,
    }
    return Trace(lengths, correct, looping, int(max_tokens), params)
