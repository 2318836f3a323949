"""Resource costs of one subblock (Llama-Nemotron §2): parameters, KV-cache bytes at batch × sequence,
and latency — an analytical roofline of one decode step (max of compute time and memory
time on the target hardware) and, when asked, a measured forward on the machine at hand."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Hardware:
    """Target for the analytical latency. Defaults: one H100 SXM, bf16 dense."""

    peak_flops: float = 989e12
    memory_bandwidth: float = 3.35e12  # bytes / s
    dtype_bytes: int = 2
    # fixed cost of one sequential subblock (kernel launches, a tensor-parallel all-reduce):
    # what FFN Fusion saves per merged layer. An assumption, not a measurement.
    subblock_overhead_s: float = 1e-5


def parameters(module) -> int:
    return sum(p.numel() for p in module.parameters())


def kv_cache_bytes(kind: str, kv_heads: int | None, head_dim: int, batch: int, sequence: int, dtype_bytes: int) -> int:
    """K and V of one layer for ``batch`` sequences of ``sequence`` tokens (0 without attention)."""
    return 2 * kv_heads * head_dim * batch * sequence * dtype_bytes if kind == "attention" else 0


def decode_latency(
    params: int, kind: str, heads: int, head_dim: int, kv_bytes: int, batch: int, sequence: int, hardware: Hardware
) -> float:
    """Seconds for one decode step of ``batch`` sequences at context ``sequence``: weights and
    the KV cache are read once, 2 FLOPs per weight per sequence, plus attention over the context,
    plus a fixed per-subblock overhead."""
    flops = 2.0 * params * batch
    if kind == "attention":
        flops += 4.0 * batch * sequence * heads * head_dim
    if params == 0 and kind != "attention":
        return 0.0  # a removed subblock
    bytes_moved = params * hardware.dtype_bytes + kv_bytes
    return max(flops / hardware.peak_flops, bytes_moved / hardware.memory_bandwidth) + hardware.subblock_overhead_s


@torch.no_grad()
def measured_latency(run, inputs: torch.Tensor, repeats: int = 5) -> float:
    """Median seconds of ``run(inputs)`` here (after one warm-up call)."""
    run(inputs)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(inputs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)
