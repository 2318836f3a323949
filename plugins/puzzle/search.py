"""Puzzle's architecture search (Llama-Nemotron §2, SPEC §6.3) as a mixed-integer program.

One binary x[l, v] per layer l and library variant v:

    minimise    Σ_l Σ_v quality[l, v] · x[l, v]
    subject to  Σ_v x[l, v] = 1                          for every layer l
                Σ_l Σ_v resource_k[l, v] · x[l, v] ≤ B_k   for every budget k
                x[l, v] = 0 where quality[l, v] = inf      (variant not allowed there)

Solved exactly by HiGHS through ``scipy.optimize.milp`` (maintained, in SciPy's wheels for
every platform, no solver binary to install; relative gap set to 0). A greedy baseline and a
brute-force enumerator are here to measure the gap and to test exactness.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Mapping

import numpy as np


class InfeasibleBudget(ValueError):
    """No architecture of this library fits the budgets."""


@dataclass(frozen=True)
class Solution:
    choice: np.ndarray  # variant index per layer
    quality: float
    resources: dict[str, float]


def _validate(quality, resources: Mapping[str, np.ndarray], budgets: Mapping[str, float]):
    quality = np.asarray(quality, dtype=np.float64)
    if quality.ndim != 2 or quality.size == 0:
        raise ValueError(f"quality must be a non-empty layers × variants array, got shape {quality.shape}")
    if np.isnan(quality).any() or (quality == -np.inf).any():
        raise ValueError("quality holds NaN or -inf (use +inf to forbid a variant in a layer)")
    allowed = np.isfinite(quality)
    empty = np.flatnonzero(~allowed.any(axis=1))
    if len(empty):
        raise InfeasibleBudget(f"layer {empty[0]} allows no variant (quality is inf everywhere)")
    arrays = {}
    for name, budget in budgets.items():
        if name not in resources:
            raise KeyError(f"budget {name!r} names no resource; resources: {sorted(resources)}")
        array = np.asarray(resources[name], dtype=np.float64)
        if array.shape != quality.shape:
            raise ValueError(f"resource {name!r} has shape {array.shape}, quality {quality.shape}")
        if not np.isfinite(array[allowed]).all():
            raise ValueError(f"resource {name!r} must be finite where the variant is allowed")
        smallest = float(np.where(allowed, array, np.inf).min(axis=1).sum())
        if smallest > budget:
            raise InfeasibleBudget(f"budget {name}={budget:g} is below the smallest possible model ({smallest:g})")
        arrays[name] = array
    return quality, allowed, arrays


def _solution(choice, quality, arrays) -> Solution:
    rows = np.arange(len(choice))
    return Solution(choice, float(quality[rows, choice].sum()), {k: float(a[rows, choice].sum()) for k, a in arrays.items()})


def solve(quality, resources: Mapping[str, np.ndarray], budgets: Mapping[str, float], time_limit_s: float = 60.0) -> Solution:
    """The exact optimum (HiGHS MILP). Raises InfeasibleBudget when nothing fits."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_array

    quality, allowed, arrays = _validate(quality, resources, budgets)
    layers, variants = quality.shape
    n = layers * variants
    cost = np.where(allowed, quality, 0.0).ravel()
    one_per_layer = csr_array((np.ones(n), (np.repeat(np.arange(layers), variants), np.arange(n))), shape=(layers, n))
    constraints = [LinearConstraint(one_per_layer, 1, 1)]
    if arrays:
        matrix = np.stack([np.where(allowed, a, 0.0).ravel() for a in arrays.values()])
        constraints.append(LinearConstraint(matrix, -np.inf, np.array(list(budgets[k] for k in arrays))))
    result = milp(cost, integrality=np.ones(n), bounds=Bounds(0, allowed.ravel().astype(float)), constraints=constraints,
                  options={"mip_rel_gap": 0.0, "time_limit": time_limit_s})
    if result.status == 2:
        raise InfeasibleBudget(f"no choice of one variant per layer meets all budgets {dict(budgets)} together")
    if result.x is None:
        raise RuntimeError(f"MILP solver stopped without a solution: {result.message}")
    choice = np.rint(result.x).reshape(layers, variants).argmax(axis=1)
    return _solution(choice, quality, arrays)


def greedy(quality, resources: Mapping[str, np.ndarray], budgets: Mapping[str, float]) -> Solution:
    """Baseline: start from the best variant everywhere, then repeatedly take the swap that cuts
    the (budget-normalised) overrun most per unit of added quality cost."""
    quality, allowed, arrays = _validate(quality, resources, budgets)
    layers = quality.shape[0]
    rows = np.arange(layers)
    choice = np.where(allowed, quality, np.inf).argmin(axis=1)
    scale = {k: max(abs(b), 1e-12) for k, b in budgets.items()}

    def overrun(ch) -> float:
        return sum(max(0.0, a[rows, ch].sum() - budgets[k]) / scale[k] for k, a in arrays.items())

    current = overrun(choice)
    while current > 0:
        best, best_ratio = None, np.inf
        for layer, variant in zip(*np.nonzero(allowed)):
            if variant == choice[layer]:
                continue
            trial = choice.copy()
            trial[layer] = variant
            gain = current - overrun(trial)
            if gain <= 0:
                continue
            ratio = max(quality[layer, variant] - quality[layer, choice[layer]], 0.0) / gain
            if ratio < best_ratio:
                best, best_ratio = trial, ratio
        if best is None:
            raise InfeasibleBudget("greedy found no swap that reduces the budget overrun")
        choice, current = best, overrun(best)
    return _solution(choice, quality, arrays)


def brute_force(quality, resources: Mapping[str, np.ndarray], budgets: Mapping[str, float]) -> Solution:
    """Every combination (tests only: variants ** layers)."""
    quality, allowed, arrays = _validate(quality, resources, budgets)
    best = None
    for combo in itertools.product(*(np.flatnonzero(row) for row in allowed)):
        candidate = _solution(np.asarray(combo), quality, arrays)
        if all(candidate.resources[k] <= budgets[k] + 1e-9 for k in arrays) and (best is None or candidate.quality < best.quality - 1e-12):
            best = candidate
    if best is None:
        raise InfeasibleBudget(f"no choice of one variant per layer meets all budgets {dict(budgets)} together")
    return best


def pareto_front(quality, resources: Mapping[str, np.ndarray], resource: str, points: int = 12, fixed: Mapping[str, float] | None = None) -> list[Solution]:
    """Optimal architectures for ``points`` budgets on ``resource`` between the smallest and the
    largest possible model (other budgets ``fixed``): the accuracy/efficiency front."""
    quality = np.asarray(quality, dtype=np.float64)
    array = np.asarray(resources[resource], dtype=np.float64)
    allowed = np.isfinite(quality)
    low = float(np.where(allowed, array, np.inf).min(axis=1).sum())
    high = float(np.where(allowed, array, -np.inf).max(axis=1).sum())
    front = []
    for budget in np.linspace(low, high, points):
        try:
            front.append(solve(quality, resources, {**(fixed or {}), resource: float(budget)}))
        except InfeasibleBudget:
            continue
    return front
