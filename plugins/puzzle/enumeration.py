"""Puzzle's search (Llama-Nemotron §2) solved exactly by Lagrangian-bounded enumeration.

Faster than the MILP on Puzzle-shaped menus (many near-equal layers leave HiGHS thousands of
nodes to close a gap of ~5e-4); :func:`reasonrl.plugins.puzzle.search.solve` runs it first and
falls back to the MILP only when the enumeration grows past its state cap.

Why it is exact. With one multiplier λ_k ≥ 0 per budget (the LP relaxation's duals) and budget
rows scaled to limits u_k, every choice x of one variant per layer satisfies

    cost(x) = LB + Σ_l rc[l, x_l] + λ·(u − r(x)),   LB = Σ_l min_v (c + λ·r)[l, v] − λ·u,

with reduced costs rc[l, v] = (c + λ·r)[l, v] − min_v' (c + λ·r)[l, v'] ≥ 0, and λ·(u − r(x)) ≥ 0
when x fits. So a fitting x with cost ≤ LB + T uses only variants with rc ≤ T. A pass with
threshold T walks the layers that keep more than one such variant and keeps a partial choice
only while (a) its resources plus the remaining layers' smallest still fit and (b) for every
multiplier λ' of a small grid around λ, its cost + λ'·(r − u) + Σ_remaining min (c + λ'·r) — a
lower bound on any completion — stays ≤ LB + T. What is left at the end is every fitting x with
cost ≤ LB + T; if the cheapest costs ≤ LB + T it is the optimum, otherwise T grows (never past
the best fitting cost found, at which that choice itself survives, so the loop ends).
Layers whose variants differ most in resources go first: the bounds bite early.
"""

from __future__ import annotations

import itertools

import numpy as np

# multipliers of a binding budget's λ (a non-binding one keeps 0); measured on the bench's
# Puzzle-like menus: a narrow, fine grid prunes most per unit of work
GRID_FACTORS = np.array([0.7, 0.8, 0.88, 0.94, 1.0, 1.06, 1.13, 1.22, 1.35])
MAX_GRID = 256
BEAM_WIDTH = 50  # the first incumbent: the best partial choices by bound, layer by layer
GROWTH = 1.25
START_FRACTION = 32  # the first threshold: the beam incumbent's gap over this
STATE_CAP = 2_000_000
FIRST_FILTER = 9  # multipliers tried on every partial choice before the whole grid


class EnumerationTooLarge(RuntimeError):
    """The enumeration stopped without a proven optimum — past its state cap, or its LP or its
    numerics failed — and the caller solves the MILP instead."""


def one_variant_per_layer(layers: int, variants: int, extra_columns: int = 0):
    """The rows Σ_v x[l, v] (x flattened layer-major, then ``extra_columns`` more columns)."""
    from scipy.sparse import csr_array

    n = layers * variants
    return csr_array(
        (np.ones(n), (np.repeat(np.arange(layers), variants), np.arange(n))), shape=(layers, n + extra_columns)
    )


def lagrange_multipliers(cost: np.ndarray, rows: np.ndarray, limits: np.ndarray) -> np.ndarray | None:
    """The LP relaxation's budget duals (≥ 0), or None when even the relaxation cannot fit."""
    from scipy.optimize import linprog

    budgets, layers, variants = rows.shape
    allowed = np.isfinite(cost)
    n = layers * variants
    result = linprog(
        np.where(allowed, cost, 0.0).ravel(),
        A_ub=rows.reshape(budgets, n),
        b_ub=limits,
        A_eq=one_variant_per_layer(layers, variants),
        b_eq=np.ones(layers),
        bounds=np.column_stack([np.zeros(n), allowed.ravel().astype(float)]),
        method="highs",
    )
    if result.status == 2:
        return None
    if result.status != 0:
        raise EnumerationTooLarge(f"LP relaxation: {result.message}")
    return np.maximum(-result.ineqlin.marginals, 0.0)


def _grid(lam: np.ndarray) -> np.ndarray:
    """λ itself and multipliers around it, each ≥ 0 (any λ' ≥ 0 gives a valid bound)."""
    axes = [lam[k] * GRID_FACTORS if lam[k] > 0 else np.zeros(1) for k in range(len(lam))]
    if np.prod([len(a) for a in axes]) <= MAX_GRID:
        return np.array(list(itertools.product(*axes)))
    along_axes = [np.where(np.arange(len(lam)) == k, value, lam) for k, axis in enumerate(axes) for value in axis]
    return np.array([lam, *along_axes])


class _Pass:
    """One layer-by-layer enumeration over the variants with reduced cost ≤ threshold."""

    def __init__(self, cost, rows, limits, grid, usable):
        counts = usable.sum(axis=1)
        fixed = np.flatnonzero(counts == 1)
        free = np.flatnonzero(counts > 1)
        options = [np.flatnonzero(usable[layer]) for layer in free]
        spread = [np.ptp(rows[:, layer, opts], axis=1).max() for layer, opts in zip(free, options)]
        order = np.argsort(spread)[::-1]
        self.free, self.options = free[order], [options[i] for i in order]
        self.fixed, self.fixed_choice = fixed, usable[fixed].argmax(axis=1)
        self.cost, self.rows, self.limits, self.grid = cost, rows, limits, grid
        self.first = np.unique(np.linspace(0, len(grid) - 1, FIRST_FILTER).astype(int))
        # what the layers from depth i on add at least: per multiplier (bound) and per budget (fit)
        per_layer = np.array(
            [
                (cost[layer, opts][None, :] + grid @ rows[:, layer, opts]).min(axis=1)
                for layer, opts in zip(self.free, self.options)
            ]
        ).reshape(len(self.free), len(grid))
        smallest = np.array([rows[:, layer, opts].min(axis=1) for layer, opts in zip(self.free, self.options)])
        smallest = smallest.reshape(len(self.free), len(limits))
        self.bound_rest = np.vstack([np.cumsum(per_layer[::-1], axis=0)[::-1], np.zeros((1, len(grid)))])
        self.bound_rest -= grid @ limits
        self.fit_rest = np.vstack([np.cumsum(smallest[::-1], axis=0)[::-1], np.zeros((1, len(limits)))])

    def run(self, limit: float | None, beam: int | None = None, fit_tolerance: float = 1e-9):
        """(cost, choice) of the cheapest fitting choice left, or None; ``limit`` prunes by bound,
        ``beam`` keeps only that many partial choices (best bound first) instead."""
        cost, rows = self.cost, self.rows
        state_cost = np.array([cost[self.fixed, self.fixed_choice].sum()])
        state_use = rows[:, self.fixed, self.fixed_choice].sum(axis=1)[None, :]
        steps = []
        for depth, (layer, opts) in enumerate(zip(self.free, self.options)):
            new_cost = (state_cost[:, None] + cost[layer, opts][None, :]).ravel()
            new_use = (state_use[:, None, :] + rows[:, layer, opts].T[None, :, :]).reshape(-1, len(self.limits))
            kept = np.flatnonzero((new_use + self.fit_rest[depth + 1] <= self.limits + fit_tolerance).all(axis=1))
            if beam:
                kept = kept[np.argsort(self._bound(new_cost[kept], new_use[kept], depth + 1))[:beam]]
            else:  # a few multipliers prune most, the whole grid the rest
                kept = kept[self._bound(new_cost[kept], new_use[kept], depth + 1, self.first) <= limit]
                kept = kept[self._bound(new_cost[kept], new_use[kept], depth + 1) <= limit]
            if len(kept) > STATE_CAP:
                raise EnumerationTooLarge(f"{len(kept)} partial choices at layer {depth + 1} of {len(self.free)}")
            if not len(kept):
                return None
            steps.append((kept // len(opts), opts[kept % len(opts)]))
            state_cost, state_use = new_cost[kept], new_use[kept]
        fits = np.flatnonzero((state_use <= self.limits + fit_tolerance).all(axis=1))
        if not len(fits):
            return None
        best = int(fits[state_cost[fits].argmin()])
        best_cost = float(state_cost[best])
        choice = np.zeros(cost.shape[0], dtype=int)
        choice[self.fixed] = self.fixed_choice
        for depth in range(len(self.free) - 1, -1, -1):
            parent, pick = steps[depth]
            choice[self.free[depth]] = pick[best]
            best = int(parent[best])
        return best_cost, choice

    def _bound(self, state_cost, state_use, depth, which=slice(None), chunk=20_000):
        """Each partial choice's best lower bound over the grid's multipliers (or ``which`` of them)."""
        grid, rest = self.grid[which], self.bound_rest[depth, which]
        out = np.empty(len(state_cost))
        for start in range(0, len(state_cost), chunk):
            part = slice(start, start + chunk)
            out[part] = (state_use[part] @ grid.T + rest).max(axis=1) + state_cost[part]
        return out


def exact_choice(cost: np.ndarray, rows: np.ndarray, limits: np.ndarray) -> np.ndarray | None:
    """The optimum variant per layer of ``cost`` (layers × variants, inf = not allowed) under
    ``rows[k] · x ≤ limits[k]``; None when no choice fits. Raises EnumerationTooLarge when the
    enumeration outgrows its cap."""
    if not len(limits):
        return cost.argmin(axis=1)
    lam = lagrange_multipliers(cost, rows, limits)
    if lam is None:
        return None
    priced = cost + np.tensordot(lam, rows, axes=1)
    cheapest = priced.min(axis=1, keepdims=True)
    reduced = priced - cheapest
    lower = float(cheapest.sum() - lam @ limits)
    grid = _grid(lam)
    tolerance = 1e-9 * max(1.0, abs(lower))

    start = _Pass(cost, rows, limits, grid, np.isfinite(reduced)).run(None, beam=BEAM_WIDTH)
    incumbent = start if start is not None else (np.inf, None)
    threshold = (incumbent[0] - lower) / START_FRACTION if start is not None else 1e-3 * max(1.0, abs(lower))
    widest = float(reduced[np.isfinite(reduced)].max())
    while True:
        threshold = min(threshold, incumbent[0] - lower)
        if not np.isfinite(incumbent[0]) and threshold >= widest:
            # every variant usable and nothing fitting found yet: one pass pruned by fit alone is
            # exhaustive — its cheapest survivor is the optimum, no survivor means nothing fits
            found = _Pass(cost, rows, limits, grid, np.isfinite(reduced)).run(np.inf)
            return None if found is None else found[1]
        found = _Pass(cost, rows, limits, grid, reduced <= threshold + tolerance).run(lower + threshold + tolerance)
        if found is not None and found[0] <= lower + threshold + tolerance:
            return found[1]
        if found is not None and found[0] < incumbent[0]:
            incumbent = found
        if threshold >= incumbent[0] - lower:  # the incumbent should have survived: numerics
            raise EnumerationTooLarge("the enumeration lost its incumbent (numerical tolerance)")
        threshold *= GROWTH if np.isfinite(incumbent[0]) else 2.0
        if threshold * GROWTH >= incumbent[0] - lower:  # one step short: a pass costs more at each step
            threshold = incumbent[0] - lower
