"""``reasonrl bench objective``: forward+backward time of ``longcat`` vs verl's ``vanilla``.

Both losses are called through verl's registry, with the same verl actor config (the
LongCat mapping: triplet bounds, ``seq-mean-token-sum-norm`` with ``loss_scale_factor`` =
T_max) on identical tensors, rollout IS weights included. Prints the median times and
their ratio (the objectives issue's target: ≤ 1.1×).
"""

from __future__ import annotations

import argparse
import statistics
import time

from reasonrl.contracts import CliCommand


def _inputs(batch: int, tokens: int, device: str, seed: int = 0):
    import torch

    generator = torch.Generator(device="cpu").manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=generator).to(device)

    old_log_prob = -randn(batch, tokens).abs()
    log_prob = (old_log_prob + 0.3 * randn(batch, tokens)).requires_grad_(True)
    advantages = randn(batch, 1).expand(batch, tokens).contiguous()
    lengths = torch.randint(tokens // 4, tokens + 1, (batch, 1), generator=generator).to(device)
    mask = (torch.arange(tokens, device=device)[None, :] < lengths).float()
    weights = torch.exp(0.2 * randn(batch, tokens)).clamp(max=2.0) * mask
    return old_log_prob, log_prob, advantages, mask, weights


def actor_config(t_max: int):
    """verl's actor config as the longcat recipe composes it, T_max = the benchmark's length."""
    from verl.utils.config import omega_conf_to_dataclass

    from reasonrl.cli.train import compose_config

    config = omega_conf_to_dataclass(
        compose_config(["recipe=longcat", f"data.max_response_length={t_max}"]).actor_rollout_ref.actor
    )
    config.global_batch_info.update(
        dp_size=1, batch_num_tokens=None, global_batch_size=None, loss_scale_factor=config.loss_scale_factor
    )
    return config


def time_loss(loss_fn, config, inputs, repeats: int, device: str) -> list[float]:
    import torch

    old_log_prob, log_prob, advantages, mask, weights = inputs
    times = []
    for _ in range(repeats + 2):  # two warm-up rounds
        log_prob.grad = None
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        loss, _metrics = loss_fn(old_log_prob, log_prob, advantages, mask.bool(), config.loss_agg_mode, config, weights)
        loss.backward()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return times[2:]


def run_benchmark(batch: int, tokens: int, repeats: int, device: str) -> dict[str, float]:
    import verl  # noqa: F401  (registers the losses through reasonrl's bridge)
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    config = actor_config(t_max=tokens)
    inputs = _inputs(batch, tokens, device)
    results = {}
    # interleave the two so that machine noise hits both alike
    samples: dict[str, list[float]] = {"vanilla": [], "longcat": []}
    for _round in range(3):
        for name in samples:
            samples[name] += time_loss(get_policy_loss_fn(name), config, inputs, repeats, device)
    for name, times in samples.items():
        results[name] = statistics.median(times)
    results["ratio"] = results["longcat"] / results["vanilla"]
    return results


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int, default=64, help="responses (default 64)")
    parser.add_argument("--tokens", type=int, default=4096, help="response tokens (default 4096)")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per loss and round (3 rounds)")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")


def _run(args: argparse.Namespace) -> int:
    import torch

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    print(
        f"objective loss forward+backward, {args.batch} x {args.tokens} tokens, {device}, torch {torch.__version__}, {torch.get_num_threads()} threads"
    )
    results = run_benchmark(args.batch, args.tokens, args.repeats, device)
    print(f"  vanilla (verl)  {results['vanilla'] * 1e3:9.3f} ms")
    print(f"  longcat         {results['longcat'] * 1e3:9.3f} ms")
    print(f"  ratio           {results['ratio']:8.3f}x  (target <= 1.1x)")
    return 0


BENCHMARK = CliCommand(
    name="objective",
    help="forward+backward time of the longcat loss vs verl's vanilla on identical tensors",
    configure=_configure,
    run=_run,
)
