"""Stage ``score`` (Llama-Nemotron §2): per subblock, the parent with only that
subblock swapped in, on held-out text — KL(parent ‖ child) and LM loss — and its resource costs
(``costs.py``), into ``scores.parquet`` and ``parent_metrics.json``."""

from __future__ import annotations

import json

import torch

from reasonrl.plugins.puzzle import costs as cost_model
from reasonrl.plugins.puzzle.context import PARTS, PuzzleContext
from reasonrl.plugins.puzzle.stages.common import assemble, evaluate
from reasonrl.plugins.puzzle.subblocks import AttentionContext, run_subblock, subblock


def stage_score(ctx: PuzzleContext) -> None:
    import pandas as pd

    path = ctx.run_dir / "scores.parquet"
    if path.exists():
        return
    parent = ctx.parent
    reference = ctx.parent_logits
    base = evaluate(ctx, parent, reference)
    resource_costs = _resource_costs(ctx)
    rows = []
    layers = len(parent.model.layers)
    for layer in range(layers):
        for part in PARTS:
            for variant in ctx.variants(part):
                choice = list(ctx.parent_choice())
                a, f = choice[layer]
                choice[layer] = (variant, f) if part == "attention" else (a, variant)
                metrics = (
                    {"kl": 0.0, "lm_loss": base["lm_loss"]}
                    if ctx.is_parent_variant(part, variant)
                    else evaluate(ctx, assemble(ctx, choice), reference)
                )
                rows.append(
                    {
                        "layer": layer,
                        "part": part,
                        "variant": variant.name,
                        "kl": metrics["kl"],
                        "lm_loss": metrics["lm_loss"],
                        "lm_loss_delta": metrics["lm_loss"] - base["lm_loss"],
                        **resource_costs[(part, variant)],
                    }
                )
        ctx.log(f"score: layer {layer + 1}/{layers}")
    pd.DataFrame(rows).to_parquet(path)
    (ctx.run_dir / "parent_metrics.json").write_text(json.dumps(base))


def _resource_costs(ctx: PuzzleContext) -> dict[tuple[str, object], dict[str, float]]:
    """Per (part, variant): params, KV bytes, roofline latency (+ measured). They depend on the
    variant's shape only: once per variant, not per layer."""
    s, config = ctx.settings, ctx.parent_config
    head_dim = config.hidden_size // config.num_attention_heads
    hardware = cost_model.Hardware(**s.hardware)
    resource_costs = {}
    context = AttentionContext(ctx.parent.model, s.sequence_length)
    probe = torch.randn(s.distill_batch, s.sequence_length, config.hidden_size, device=s.device)
    for part in PARTS:
        for variant in ctx.variants(part):
            module = subblock(config, part, variant).to(s.device)
            params, kind = cost_model.parameters(module), variant.kind
            kv = (
                cost_model.kv_cache_bytes(
                    kind, getattr(variant, "kv_heads", None), head_dim, s.batch, s.sequence, hardware.dtype_bytes
                )
                if part == "attention"
                else 0
            )
            costs = {
                "params": params,
                "kv_bytes": kv,
                "latency_s": cost_model.decode_latency(
                    params,
                    kind if part == "attention" else "ffn",
                    config.num_attention_heads,
                    head_dim,
                    kv,
                    s.batch,
                    s.sequence,
                    hardware,
                ),
            }
            if s.measure_latency:
                costs["measured_latency_s"] = (
                    cost_model.measured_latency(lambda x, m=module, p=part: run_subblock(m, p, x, context), probe)
                    if kind != "no_op"
                    else 0.0
                )
            resource_costs[(part, variant)] = costs
    return resource_costs
