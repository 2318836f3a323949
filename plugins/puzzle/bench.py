"""``reasonrl bench puzzle-search``: the MIP on a random 80-layer × 30-variant instance with three
budgets (target < 1 s) and the optimality gap of the greedy baseline on it."""

from __future__ import annotations

import argparse
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
    parser.add_argument("--variants", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=3, help="instances to solve")


def _run(args: argparse.Namespace) -> int:
    from reasonrl.plugins.puzzle.search import greedy, solve

    for seed in range(args.seeds):
        quality, resources, budgets = random_instance(args.layers, args.variants, seed)
        start = time.perf_counter()
        optimum = solve(quality, resources, budgets)
        seconds = time.perf_counter() - start
        baseline = greedy(quality, resources, budgets)
        print(
            f"instance {seed}: {args.layers} layers × {args.variants} variants, budgets {sorted(budgets)}: MILP (HiGHS) {seconds:.3f} s, "
            f"objective {optimum.quality:.4f}; greedy {baseline.quality:.4f} (gap {(baseline.quality - optimum.quality) / optimum.quality:+.2%})",
            flush=True,
        )
    return 0


BENCHMARK = CliCommand(
    "puzzle-search",
    "the Puzzle MIP on 80 layers × 30 variants × 3 budgets, and greedy's optimality gap",
    _configure,
    _run,
)
