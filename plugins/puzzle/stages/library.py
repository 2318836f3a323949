"""Stage ``build-library`` (Llama-Nemotron §2): every layer × every menu subblock,
initialised from the parent (``library.py``) into ``library/init/``."""

from __future__ import annotations

import torch

from reasonrl.plugins.puzzle.context import PARTS, PuzzleContext
from reasonrl.plugins.puzzle.distill import layer_activations
from reasonrl.plugins.puzzle.library import ffn_channel_importance, least_squares, merge_kv_heads, prune_ffn
from reasonrl.plugins.puzzle.stages.common import save_subblock, trained_subblocks
from reasonrl.plugins.puzzle.subblocks import AttentionContext, subblock, subblock_state


def stage_build_library(ctx: PuzzleContext) -> None:
    parent, s = ctx.parent, ctx.settings
    subblocks = trained_subblocks(ctx)
    todo = [(layer, part, v) for layer, part, v in subblocks if not ctx.subblock_path("init", layer, v).exists()]
    if not todo:
        return
    config = ctx.parent_config
    context = AttentionContext(parent.model, s.sequence_length)
    calibration = ctx.data["calibration"]
    acts, acts_layer = None, None
    for layer, part, variant in todo:
        if acts_layer != layer:  # one layer's calibration activations at a time
            chunks = [
                layer_activations(parent, calibration[i : i + s.distill_batch], layer, context)
                for i in range(0, len(calibration), s.distill_batch)
            ]
            acts = {p: tuple(torch.cat([c[p][k] for c in chunks]) for k in (0, 1)) for p in PARTS}
            acts_layer = layer
        new = _initial_state(config, parent.model.layers[layer], part, variant, *acts[part])
        subblock(config, part, variant).load_state_dict(new, strict=True)  # the shapes fit the variant
        save_subblock(
            ctx.subblock_path("init", layer, variant), new, {"layer": layer, "part": part, "variant": variant.name}
        )
    ctx.log(f"library: {len(todo)} subblocks initialised from the parent ({len(subblocks)} in all)")


def _initial_state(config, parent_layer, part: str, variant, inputs, outputs) -> dict[str, torch.Tensor]:
    """The variant's weights from the parent layer's and its calibration (input, output) of ``part``."""
    state = subblock_state(parent_layer.state_dict(), part)
    if variant.kind == "linear":
        norm = parent_layer.input_layernorm if part == "attention" else parent_layer.post_attention_layernorm
        with torch.no_grad():
            weight = least_squares(norm(inputs), outputs)
        prefix = "self_attn.linear_attn" if part == "attention" else "mlp.linear_mlp"
        norm_key = "input_layernorm.weight" if part == "attention" else "post_attention_layernorm.weight"
        new = {norm_key: state[norm_key].clone(), f"{prefix}.weight": weight}
    elif part == "attention":
        head_dim = config.hidden_size // config.num_attention_heads
        new = {k: v.clone() for k, v in state.items()}
        for proj in ("k_proj", "v_proj"):
            new[f"self_attn.{proj}.weight"] = merge_kv_heads(
                state[f"self_attn.{proj}.weight"], config.num_key_value_heads, variant.kv_heads, head_dim
            )
    else:
        with torch.no_grad():
            importance = ffn_channel_importance(parent_layer.mlp, parent_layer.post_attention_layernorm(inputs))
        pruned = prune_ffn(
            {k.removeprefix("mlp."): v for k, v in state.items() if k.startswith("mlp.")}, importance, variant.size
        )
        new = {
            "post_attention_layernorm.weight": state["post_attention_layernorm.weight"].clone(),
            **{f"mlp.{k}": v for k, v in pruned.items()},
        }
    return {k: v.detach().cpu() for k, v in new.items()}
