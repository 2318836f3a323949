"""``reasonrl bench puzzle-search``: the exact MIP on 80-layer × 30-variant instances with three
budgets (target < 1 s each; issue 24) — Puzzle-like menus (``instances.py``: 5 attention × 6 FFN
variants of a 70B-class parent) and random ones — with min / median / max, and the optimality gap
of the greedy baseline."""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from reasonrl.contracts import CliCommand


def random_instance(layers: int, variants: int, seed: int):
    """Costs shaped like a real library: variant 0 is the parent (no quality cost, largest);
    smaller variants cost more quality; three resources correlated with size."""
    rng = np.random.default_rng(seed)
    size = np.sort(rng.random((layers, variants)), axis=1)[:, ::-1]
    size[:, 0] = 1.0
    quality = (1 - size) ** 2 * rng.uniform(0.5, 2.0, (layers, 1)) + 0.01 * rng.random((layers, variants))
    quality[:, 0] = 0.0
    resources = {
        "params": size * 100,
        "kv_bytes": np.where(rng.random((layers, variants)) < 0.3, 0.0, size * 50),
        "latency": size * rng.uniform(0.8, 1.2, (layers, variants)),
    }
    budgets = {"params": 0.6 * layers * 100, "kv_bytes": 0.7 * layers * 50, "latency": 0.65 * layers}
    return quality, resources, budgets


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--layers", type=int, default=80)
    parser.add_argument("--variants", type=int, default=30, help="random menus only (Puzzle-like: 5 × 6)")
    parser.add_argument("--seeds", type=int, default=10, help="instances per menu kind")
    parser.add_argument("--menu", choices=("puzzle", "random", "both"), default="both")
    parser.add_argument("--no-greedy", action="store_true", help="skip the greedy baseline (slow on 80 layers)")


def _run(args: argparse.Namespace) -> int:
    from reasonrl.plugins.puzzle.instances import puzzle_like_instance
    from reasonrl.plugins.puzzle.search import greedy, solve

    kinds = {
        "puzzle": lambda seed: puzzle_like_instance(seed, layers=args.layers),
        "random": lambda seed: random_instance(args.layers, args.variants, seed),
    }
    for kind, make in kinds.items():
        if args.menu not in (kind, "both"):
            continue
        times = []
        for seed in range(args.seeds):
            quality, resources, budgets = make(seed)
            start = time.perf_counter()
            optimum = solve(quality, resources, budgets)
            times.append(time.perf_counter() - start)
            binding = [k for k in sorted(budgets) if optimum.resources[k] >= 0.999 * budgets[k]]
            line = (
                f"{kind} {seed}: {quality.shape[0]} layers × {quality.shape[1]} variants: MILP (HiGHS) {times[-1]:.3f} s, "
                f"objective {optimum.quality:.4f}, binding {','.join(binding) or 'none'}"
            )
            if not args.no_greedy:
                baseline = greedy(quality, resources, budgets)
                line += f"; greedy {baseline.quality:.4f} (gap {(baseline.quality - optimum.quality) / optimum.quality:+.2%})"
            print(line, flush=True)
        print(
            f"{kind}: {len(times)} instances, solve time min {min(times):.3f} s, median {statistics.median(times):.3f} s, "
            f"max {max(times):.3f} s; under 1 s: {sum(t < 1 for t in times)}/{len(times)}",
            flush=True,
        )
    return 0


BENCHMARK = CliCommand(
    "puzzle-search",
    "the exact Puzzle MIP on Puzzle-like and random 80-layer menus (3 budgets): min/median/max time, greedy's gap",
    _configure,
    _run,
)
