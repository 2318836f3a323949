"""``reasonrl bench puzzle-search``: the exact search on 80-layer × 30-variant instances with three
budgets (target < 1 s each; issue 24) — Puzzle-like menus (``instances.py``: 5 attention × 6 FFN
variants of a 70B-class parent) and random ones — with min / median / max, the optimality gap of
the greedy baseline and, with ``--milp``, the MILP's time and optimum beside it. SciPy's optimizer
is imported before the clock starts (an import, not a solve)."""

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
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--milp", action="store_true", help="also solve each instance as a MILP (HiGHS) and compare")


def _run(args: argparse.Namespace) -> int:
    import scipy.optimize  # noqa: F401  (imported once, outside the timings)

    from benchmarks.puzzle.instances import puzzle_like_instance
    from reasonrl.plugins.puzzle.search import greedy, solve

    kinds = {
        "puzzle": lambda seed: puzzle_like_instance(seed, layers=args.layers),
        "random": lambda seed: random_instance(args.layers, args.variants, seed),
    }
    for kind, make in kinds.items():
        if args.menu not in (kind, "both"):
            continue
        times, milp_times = [], []
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            quality, resources, budgets = make(seed)
            start = time.perf_counter()
            optimum = solve(quality, resources, budgets)
            times.append(time.perf_counter() - start)
            binding = [k for k in sorted(budgets) if optimum.resources[k] >= 0.999 * budgets[k]]
            line = (
                f"{kind} {seed}: {quality.shape[0]} layers × {quality.shape[1]} variants: exact search {times[-1]:.3f} s, "
                f"objective {optimum.quality:.6f}, binding {','.join(binding) or 'none'}"
            )
            if args.milp:
                start = time.perf_counter()
                milp = solve(quality, resources, budgets, method="milp")
                milp_times.append(time.perf_counter() - start)
                line += (
                    f"; MILP (HiGHS) {milp_times[-1]:.3f} s, objective {milp.quality - optimum.quality:+.1e} from it"
                )
            if not args.no_greedy:
                baseline = greedy(quality, resources, budgets)
                line += f"; greedy {baseline.quality:.4f} (gap {(baseline.quality - optimum.quality) / optimum.quality:+.2%})"
            print(line, flush=True)
        for label, spent in (("exact search", times), ("MILP (HiGHS)", milp_times)):
            if spent:
                print(
                    f"{kind}: {len(spent)} instances, {label} min {min(spent):.3f} s, median {statistics.median(spent):.3f} s, "
                    f"max {max(spent):.3f} s; under 1 s: {sum(t < 1 for t in spent)}/{len(spent)}",
                    flush=True,
                )
    return 0


BENCHMARK = CliCommand(
    "puzzle-search",
    "the exact Puzzle search on Puzzle-like and random 80-layer menus (3 budgets): min/median/max time, greedy's gap (--milp: HiGHS beside it)",
    _configure,
    _run,
)
