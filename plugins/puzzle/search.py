"""Puzzle's architecture search (Llama-Nemotron §2) as a mixed-integer program.

One binary x[l, v] per layer l and library variant v:

    minimise    Σ_l Σ_v quality[l, v] · x[l, v]
    subject to  Σ_v x[l, v] = 1                          for every layer l
                Σ_l Σ_v resource_k[l, v] · x[l, v] ≤ B_k   for every budget k
                x[l, v] = 0 where quality[l, v] = inf      (variant not allowed there)

Solved exactly, first by Lagrangian-bounded enumeration (``enumeration.py``: the LP's duals
bound every partial choice; 0.05–0.2 s on Puzzle-shaped 80-layer menus where the MILP takes
0.5–4 s), else — FFN Fusion priced in, or an enumeration past its state cap — as a MILP by HiGHS
through ``scipy.optimize.milp`` (in SciPy's wheels for every platform; relative gap 0). A greedy
baseline and a brute-force enumerator are here to measure the gap and to test exactness.
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


def fused_layers(choice: np.ndarray, fusable: np.ndarray | None) -> int:
    """Layers that FFN Fusion merges into the layer before them (both FFN-only)."""
    if fusable is None:
        return 0
    chosen = fusable[np.arange(len(choice)), choice]
    return int((chosen[1:] & chosen[:-1]).sum())


def _solution(choice, quality, arrays, fusable=None, fusion_saving=None) -> Solution:
    rows = np.arange(len(choice))
    merged = fused_layers(choice, fusable)
    saving = fusion_saving or {}
    return Solution(
        choice,
        float(quality[rows, choice].sum()),
        {k: float(a[rows, choice].sum()) - merged * saving.get(k, 0.0) for k, a in arrays.items()},
    )


def solve(
    quality,
    resources: Mapping[str, np.ndarray],
    budgets: Mapping[str, float],
    time_limit_s: float = 60.0,
    fusable: np.ndarray | None = None,
    fusion_saving: Mapping[str, float] | None = None,
    method: str = "auto",
) -> Solution:
    """The exact optimum. Raises InfeasibleBudget when nothing fits. ``method``: "auto" (the
    enumeration, the MILP if it outgrows its cap or fusion is priced in), "enumeration" or "milp".

    With ``fusable`` (layers × variants: FFN-only variants, attention removed) and
    ``fusion_saving`` (per resource), FFN Fusion is priced in: each layer whose variant and whose
    predecessor's are both fusable saves ``fusion_saving[k]`` of resource k (one sequential
    subblock less). Linearised with one continuous y_l ≤ n_l, y_l ≤ n_{l-1} per layer (n_l = 1
    when layer l's variant is fusable): Σ r_k·x − saving_k·Σ y ≤ B_k.
    """
    if method not in ("auto", "enumeration", "milp"):
        raise ValueError(f"method must be auto, enumeration or milp, got {method!r}")
    quality, allowed, arrays = _validate(quality, resources, budgets)
    fuse = fusable is not None and bool(fusion_saving) and quality.shape[0] > 1
    if method != "milp" and not fuse:
        from reasonrl.plugins.puzzle.enumeration import EnumerationTooLarge, exact_choice

        masked = _masked(allowed, arrays)
        scale = _row_scales(masked, budgets)
        rows = np.stack([a / scale[k] for k, a in masked.items()]) if masked else None
        limits = np.array([budgets[k] / scale[k] for k in masked])
        try:
            choice = exact_choice(np.where(allowed, quality, np.inf), rows, limits)
        except EnumerationTooLarge:
            if method == "enumeration":
                raise
        else:
            if choice is None:
                raise InfeasibleBudget(f"no choice of one variant per layer meets all budgets {dict(budgets)} together")
            return _solution(choice, quality, arrays)
    return _solve_milp(quality, allowed, arrays, budgets, time_limit_s, fusable if fuse else None, fusion_saving)


def _masked(allowed, arrays) -> dict[str, np.ndarray]:
    """Each resource with 0 where the variant is not allowed (those entries are never chosen)."""
    return {k: np.where(allowed, a, 0.0) for k, a in arrays.items()}


def _row_scales(masked, budgets) -> dict[str, float]:
    """Each budget row is divided by its budget (or its largest entry): HiGHS's feasibility
    tolerance (1e-6) is absolute, so on raw rows a resource in small units (latency in seconds)
    could be overrun by 1e-6 of its unit; scaled, by 1e-6 of the budget."""
    return {k: max(abs(budgets[k]), float(np.abs(a).max()), 1e-300) for k, a in masked.items()}


def _solve_milp(quality, allowed, arrays, budgets, time_limit_s, fusable, fusion_saving) -> Solution:
    from scipy.optimize import Bounds, LinearConstraint, milp

    from reasonrl.plugins.puzzle.enumeration import one_variant_per_layer

    layers, variants = quality.shape
    n = layers * variants
    fuse = fusable is not None
    pairs = layers - 1 if fuse else 0
    cost = np.concatenate([np.where(allowed, quality, 0.0).ravel(), np.zeros(pairs)])
    constraints = [LinearConstraint(one_variant_per_layer(layers, variants, pairs), 1, 1)]
    if arrays:
        masked = _masked(allowed, arrays)
        scale = _row_scales(masked, budgets)
        matrix = np.stack(
            [
                np.concatenate([a.ravel(), np.full(pairs, -(fusion_saving or {}).get(k, 0.0))]) / scale[k]
                for k, a in masked.items()
            ]
        )
        constraints.append(LinearConstraint(matrix, -np.inf, np.array([budgets[k] / scale[k] for k in arrays])))
    if fuse:
        # y_l − n_l ≤ 0 and y_l − n_{l−1} ≤ 0 for l = 1..L−1
        fusable = np.asarray(fusable, dtype=bool) & allowed
        link = np.zeros((2 * pairs, n + pairs))
        for second in range(1, layers):  # the pair (second - 1, second)
            for row, layer in ((2 * (second - 1), second), (2 * (second - 1) + 1, second - 1)):
                link[row, n + second - 1] = 1.0
                link[row, layer * variants : (layer + 1) * variants] = -fusable[layer].astype(float)
        constraints.append(LinearConstraint(link, -np.inf, 0.0))
    integrality = np.concatenate([np.ones(n), np.zeros(pairs)])
    upper = np.concatenate([allowed.ravel().astype(float), np.ones(pairs)])
    result = milp(
        cost,
        integrality=integrality,
        bounds=Bounds(0, upper),
        constraints=constraints,
        options={"mip_rel_gap": 0.0, "time_limit": time_limit_s},
    )
    if result.status == 2:
        raise InfeasibleBudget(f"no choice of one variant per layer meets all budgets {dict(budgets)} together")
    if result.x is None:
        raise RuntimeError(f"MILP solver stopped without a solution: {result.message}")
    choice = np.rint(result.x[:n]).reshape(layers, variants).argmax(axis=1)
    return _solution(choice, quality, arrays, fusable if fuse else None, fusion_saving)


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


def brute_force(
    quality, resources: Mapping[str, np.ndarray], budgets: Mapping[str, float], fusable=None, fusion_saving=None
) -> Solution:
    """Every combination (tests only: variants ** layers)."""
    quality, allowed, arrays = _validate(quality, resources, budgets)
    best = None
    for combo in itertools.product(*(np.flatnonzero(row) for row in allowed)):
        candidate = _solution(np.asarray(combo), quality, arrays, fusable, fusion_saving)
        if all(candidate.resources[k] <= budgets[k] + 1e-9 for k in arrays) and (
            best is None or candidate.quality < best.quality - 1e-12
        ):
            best = candidate
    if best is None:
        raise InfeasibleBudget(f"no choice of one variant per layer meets all budgets {dict(budgets)} together")
    return best


def pareto_front(
    quality,
    resources: Mapping[str, np.ndarray],
    resource: str,
    points: int = 12,
    fixed: Mapping[str, float] | None = None,
) -> list[Solution]:
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
