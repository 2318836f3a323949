"""Search instances shaped like a real Puzzle library (Llama-Nemotron §2; ``reasonrl bench
puzzle-search``): a 70B-class parent (hidden 8192, 64 query heads of 128, 8 KV heads, FFN 28672),
80 layers, each layer offered every pair of

- attention: full (8 KV heads), GQA with 4 and with 2 KV heads, a linear layer (hidden × hidden,
  no KV cache), no-op;
- FFN: 100 %, 75 %, 50 %, 25 %, 10 % of the parent's width, no-op;

so 5 × 6 = 30 variants per layer. Quality cost (the block's KL from the parent, as the pipeline
scores it) grows with the removed size, weighted by a per-layer importance, plus noise; resources
— parameters, KV-cache bytes per token, decode latency (a roofline as in ``costs.decode_latency``)
— follow the block sizes with a small per-layer variation; each of the three budgets lies at
50–70 % of the parent's total.
"""

from __future__ import annotations

import numpy as np

HIDDEN, HEADS, HEAD_DIM, KV_HEADS, FFN = 8192, 64, 128, 8, 28672
ATTENTION = {"full": KV_HEADS, "gqa_half": KV_HEADS // 2, "gqa_quarter": KV_HEADS // 4, "linear": 0, "no_op": 0}
FFN_WIDTHS = (1.0, 0.75, 0.5, 0.25, 0.1, 0.0)
VARIANTS = [(attention, width) for attention in ATTENTION for width in FFN_WIDTHS]  # index 0 = parent


def _attention_params(kind: str) -> float:
    if kind == "linear":
        return HIDDEN * HIDDEN
    if kind == "no_op":
        return 0.0
    return 2 * HIDDEN * HEADS * HEAD_DIM + 2 * HIDDEN * ATTENTION[kind] * HEAD_DIM  # q, o + k, v


def puzzle_like_instance(seed: int, layers: int = 80, batch: int = 64, context: int = 4096):
    """``(quality, resources, budgets)`` for :func:`reasonrl.plugins.puzzle.search.solve`."""
    rng = np.random.default_rng(seed)
    attention_params = np.array([_attention_params(kind) for kind, _ in VARIANTS])
    ffn_params = np.array([3 * HIDDEN * FFN * width for _, width in VARIANTS])
    kv_heads = np.array([ATTENTION[kind] if kind not in ("linear", "no_op") else 0 for kind, _ in VARIANTS])
    params = attention_params + ffn_params
    kv_per_token = 2 * kv_heads * HEAD_DIM * 2.0  # K and V, bf16
    # decode step of `batch` sequences at `context`: weights + KV cache read once (memory-bound)
    bandwidth, flops_rate = 3.35e12, 989e12
    flops = 2 * params * batch + 4 * batch * context * HEADS * HEAD_DIM * (kv_heads > 0)
    latency = np.maximum(flops / flops_rate, (params * 2 + kv_per_token * batch * context) / bandwidth)
    latency = latency + 1e-5 * ((attention_params > 0).astype(float) + (ffn_params > 0))

    removed_attention = 1 - attention_params / attention_params[0]
    removed_ffn = 1 - ffn_params / ffn_params[0]
    importance_attention = rng.uniform(0.2, 2.0, (layers, 1)) * np.where(np.arange(layers) < 2, 4.0, 1.0)[:, None]
    importance_ffn = rng.uniform(0.2, 2.0, (layers, 1)) * np.where(np.arange(layers) >= layers - 2, 4.0, 1.0)[:, None]
    # GQA costs little (KV heads are redundant), linear and no-op attention more
    attention_kind_cost = np.array(
        [{"full": 0.0, "gqa_half": 0.05, "gqa_quarter": 0.15, "linear": 0.6, "no_op": 1.0}[k] for k, _ in VARIANTS]
    )
    quality = (
        importance_attention * (attention_kind_cost + 0.2 * removed_attention**2)
        + importance_ffn * removed_ffn**1.5
        + 0.02 * rng.random((layers, len(VARIANTS))) * (np.arange(len(VARIANTS)) > 0)
    )
    resources = {
        name: np.tile(per_variant, (layers, 1)) * rng.uniform(0.97, 1.03, (layers, len(VARIANTS)))
        for name, per_variant in (("params", params), ("kv_bytes", kv_per_token), ("latency", latency))
    }
    parent = {name: float(array[:, 0].sum()) for name, array in resources.items()}
    budgets = {name: float(total * rng.uniform(0.5, 0.7)) for name, total in parent.items()}
    return quality, resources, budgets
