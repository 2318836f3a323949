"""What several Puzzle stages (Llama-Nemotron §2) use: the library's subblock files,
children assembled from them, and held-out evaluation against the parent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from reasonrl.plugins.puzzle.context import PARTS, PuzzleContext
from reasonrl.plugins.puzzle.library import block_config
from reasonrl.plugins.puzzle.subblocks import build_model, split_layers, subblock_state


def save_subblock(path: Path, state: dict[str, torch.Tensor], meta: dict) -> None:
    """``path`` (safetensors) and its ``.json`` beside it."""
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    path.with_suffix(".json").write_text(json.dumps(meta))


def load_subblock(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(path))


def trained_subblocks(ctx: PuzzleContext) -> list[tuple[int, str, Any]]:
    """(layer, part, variant) of every subblock that has weights of its own to learn."""
    return [
        (layer, part, v)
        for layer in range(len(ctx.parent.model.layers))
        for part in PARTS
        for v in ctx.variants(part)
        if not ctx.is_parent_variant(part, v) and v.kind != "no_op"
    ]


def subblock_weights(ctx: PuzzleContext, layer: int, part: str, variant) -> dict[str, torch.Tensor]:
    if ctx.is_parent_variant(part, variant):
        return subblock_state(ctx.parent.model.layers[layer].state_dict(), part)
    if variant.kind == "no_op":
        return {}
    return load_subblock(ctx.subblock_path("distilled", layer, variant))


def assemble(ctx: PuzzleContext, choice: list[tuple[Any, Any]]):
    """The child for one (attention, FFN) variant pair per layer, weights from the library."""
    config = ctx.parent_config
    blocks = [block_config(a, f, config.num_attention_heads, config.hidden_size) for a, f in choice]
    base, _ = split_layers(ctx.parent.state_dict(), len(choice))
    layer_states = [
        {**subblock_weights(ctx, layer, "attention", a), **subblock_weights(ctx, layer, "ffn", f)}
        for layer, (a, f) in enumerate(choice)
    ]
    return build_model(config, blocks, base, layer_states).to(ctx.settings.device)


@torch.no_grad()
def evaluate(ctx: PuzzleContext, model, reference_logits: torch.Tensor | None = None) -> dict[str, float]:
    """Held-out LM loss (next token) and, given the parent's logits, mean per-token KL(parent ‖ model)."""
    tokens = ctx.data["heldout"]
    logits = model(input_ids=tokens).logits[:, :-1].float()
    targets = tokens[:, 1:]
    lm_loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).item()
    out = {"lm_loss": lm_loss}
    if reference_logits is not None:
        log_p = torch.log_softmax(reference_logits, -1)
        out["kl"] = (log_p.exp() * (log_p - torch.log_softmax(logits, -1))).sum(-1).mean().item()
    return out
