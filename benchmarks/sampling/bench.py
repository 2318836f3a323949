"""``reasonrl bench sampling``: (1) a simulated run (``simulation.py``) with plain dynamic
sampling, + easy pool, + prioritized — rollouts per trained rollout and the wasted share;
(2) the sampler's own time per 512-prompt batch (sample + update) on a 1 M-prompt pool
(target ≤ 1 ms); (3) optionally a plot of a Gaussian-curriculum run: pools and centre."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from benchmarks.sampling.simulation import World, run
from reasonrl.contracts import CliCommand
from reasonrl.plugins.sampling.sampler import build_sampler

COMPARED = {
    "dynamic": ["dynamic"],
    "+ easy pool": ["easy_pool", "dynamic"],
    "+ prioritized": ["prioritized", "easy_pool", "dynamic"],
}
OVERHEAD = {
    "dynamic": ["dynamic"],
    "easy pool + dynamic": ["easy_pool", "dynamic"],
    "prioritized + easy + dynamic": ["prioritized", "easy_pool", "dynamic"],
    "curriculum + easy + dynamic": ["curriculum", "easy_pool", "dynamic"],
    "gaussian + dynamic": ["gaussian_curriculum", "dynamic"],
}


def compare(prompts: int, steps: int, batch: int, responses: int, seed: int) -> dict[str, object]:
    results = {}
    for label, names in COMPARED.items():
        world = World.make(prompts, seed)
        sampler = build_sampler(names, np.arange(prompts), seed=seed, alpha=0.1)
        results[label] = run(sampler, world, steps, batch, responses, seed)
        print(
            f"  {label:<16} rollouts per trained rollout {results[label].rollouts_per_trained:5.2f} "
            f"  wasted {results[label].wasted_fraction:6.1%}   final skill {world.skill:5.2f}",
            flush=True,
        )
    return results


def overhead(pool: int, batch: int, responses: int, batches: int, seed: int) -> dict[str, tuple[float, float, float]]:
    """Per configuration: median and 99th-percentile ms of sample+update per batch, and the
    ms of one epoch refill (an O(pool) event once per pool/batch batches)."""
    rng = np.random.default_rng(seed)
    pass_rates = rng.random(pool)
    timings = {}
    for label, names in OVERHEAD.items():
        sampler = build_sampler(names, np.arange(pool), pass_rates=pass_rates, seed=seed, pace_steps=10 * batches)
        start = time.perf_counter()
        sampler.sample(batch)  # the first draw fills the first epoch
        first = time.perf_counter() - start
        per_batch = []
        for _ in range(batches):
            t0 = time.perf_counter()
            drawn = sampler.sample(batch)
            t1 = time.perf_counter()
            results = {p: (rng.random(responses) < pass_rates[p]).astype(float).tolist() for p in drawn}
            t2 = time.perf_counter()
            sampler.update(results)
            per_batch.append((t1 - t0) + (time.perf_counter() - t2))
        ms = sorted(1e3 * t for t in per_batch)
        timings[label] = (statistics.median(ms), ms[int(0.99 * (len(ms) - 1))], 1e3 * first)
        print(
            f"  {label:<30} median {timings[label][0]:6.3f} ms   p99 {timings[label][1]:6.3f} ms   epoch fill {timings[label][2]:6.1f} ms",
            flush=True,
        )
    return timings


def plot_gaussian_run(out: Path, prompts: int, steps: int, batch: int, responses: int, seed: int) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    world = World.make(prompts, seed)
    pass_rates = world.estimated_pass_rates(8, np.random.default_rng(seed + 1))
    sampler = build_sampler(
        ["gaussian_curriculum", "easy_pool", "dynamic"],
        np.arange(prompts),
        pass_rates=pass_rates,
        seed=seed,
        pace_steps=steps,
        bins=8,
    )
    history = run(sampler, world, steps, batch, responses, seed).history
    x = np.arange(1, steps + 1)
    fig, (pools, rates) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    pools.plot(x, [h["pool_active"] for h in history], label="normal pool (active)")
    pools.plot(x, [h["pool_remaining_this_epoch"] for h in history], label="left this epoch")
    pools.plot(x, [h["easy_pool_size"] for h in history], label="easy pool")
    pools.set_ylabel("prompts")
    pools.legend(loc="center right")
    pools.set_title(
        f"simulated run: Gaussian curriculum + easy pool (α=0.1) + dynamic sampling\n{prompts} prompts, batch {batch} prompts × {responses} responses",
        fontsize=10,
    )
    rates.plot(
        x, [h["curriculum_centre"] for h in history], label="curriculum centre (target pass rate)", color="black"
    )
    rates.plot(
        x, [h["drawn_precomputed_pass_rate_mean"] for h in history], label="pre-computed pass rate of drawn prompts"
    )
    rates.plot(x, [h["drawn_pass_rate_mean"] for h in history], label="observed pass rate of drawn prompts", alpha=0.7)
    rates.plot(x, [h["filtered_group_frac"] for h in history], label="no-signal groups (filtered)", alpha=0.7)
    rates.set_xlabel("training step")
    rates.set_ylim(0, 1.02)
    rates.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prompts", type=int, default=20_000, help="simulated prompt pool")
    parser.add_argument("--steps", type=int, default=150, help="simulated training steps")
    parser.add_argument("--batch", type=int, default=128, help="prompts per simulated step")
    parser.add_argument("--responses", type=int, default=16, help="responses per prompt (MiMo: 16)")
    parser.add_argument("--pool", type=int, default=1_000_000, help="pool size of the overhead benchmark")
    parser.add_argument("--overhead-batches", type=int, default=300, help="batches timed per configuration")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", type=Path, default=None, help="also write a PNG of a Gaussian-curriculum run here")


def _run(args: argparse.Namespace) -> int:
    print(
        f"simulated run: {args.prompts} prompts, {args.steps} steps × {args.batch} prompts × {args.responses} responses (verl's sync DAPO loop)"
    )
    compare(args.prompts, args.steps, args.batch, args.responses, args.seed)
    print(
        f"sampler time per {512}-prompt batch (sample + update of {args.responses} scores each), {args.pool:,}-prompt pool:"
    )
    overhead(args.pool, 512, args.responses, args.overhead_batches, args.seed)
    if args.plot:
        print(f"plot: {plot_gaussian_run(args.plot, args.prompts, args.steps, args.batch, args.responses, args.seed)}")
    return 0


BENCHMARK = CliCommand(
    name="sampling",
    help="simulated dynamic sampling vs + easy pool vs + prioritized, and the sampler's time per batch",
    configure=_configure,
    run=_run,
)
