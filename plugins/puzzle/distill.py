"""Blockwise local distillation (Llama-Nemotron §2): each library subblock learns to
reproduce its parent subblock's output from the parent's own input activations (teacher
forcing), with a normalised MSE, independently of every other subblock.

Activations are streamed: each step runs the parent up to the layer being distilled on one
batch, so memory holds one batch of one layer whatever the parent's size. A layer's subblocks
train together on the same batches (one parent pass feeds all of them); layers are independent
jobs (Ray tasks when ``workers > 1``), and a layer's finished subblocks are not retrained.
"""

from __future__ import annotations

import copy

import torch

from reasonrl.plugins.puzzle.subblocks import AttentionContext, run_subblock


@torch.no_grad()
def layer_activations(
    nas_model, input_ids: torch.Tensor, layer: int, context: AttentionContext
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The parent's (input, output) of layer ``layer``'s attention and FFN subblocks."""
    model = nas_model.model
    hidden = model.embed_tokens(input_ids)
    for index, block in enumerate(model.layers):
        attention = block.attention_delta(hidden, **context(hidden))
        middle = hidden + attention
        ffn = block.ffn_delta(middle)
        if index == layer:
            return {"attention": (hidden, attention), "ffn": (middle, ffn)}
        hidden = middle + ffn
    raise IndexError(f"layer {layer} of a {len(model.layers)}-layer model")


def normalised_mse(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return ((prediction - target) ** 2).mean() / (target**2).mean().clamp_min(1e-12)


@torch.no_grad()
def evaluate_layer(nas_model, layer: int, modules: dict, tokens: torch.Tensor, context, batch: int) -> dict:
    """Per subblock: Σ‖ŷ − y‖² / Σ‖y‖² over ``tokens``, streamed in batches."""
    error = dict.fromkeys(modules, 0.0)
    scale = dict.fromkeys(modules, 0.0)
    for start in range(0, len(tokens), batch):
        acts = layer_activations(nas_model, tokens[start : start + batch], layer, context)
        for key, (part, module) in modules.items():
            inputs, targets = acts[part]
            error[key] += float(((run_subblock(module, part, inputs, context) - targets) ** 2).sum())
            scale[key] += float((targets**2).sum())
    return {key: error[key] / max(scale[key], 1e-12) for key in modules}


def distill_layer(
    nas_model,
    layer: int,
    modules: dict,
    tokens: torch.Tensor,
    context,
    steps: int,
    lr: float,
    batch: int,
    seed: int,
    eval_sequences: int = 32,
) -> dict:
    """Train every ``modules[key] = (part, module)`` of one layer in place; returns
    ``{key: (nmse before, nmse after)}`` on the first ``eval_sequences`` sequences. A subblock
    that training did not improve keeps its initial weights (e.g. a least-squares linear map)."""
    generator = torch.Generator().manual_seed(seed)
    probe = tokens[:eval_sequences]
    initial = {key: copy.deepcopy(module.state_dict()) for key, (_, module) in modules.items()}
    before = evaluate_layer(nas_model, layer, modules, probe, context, batch)
    optimizers = {}
    for key, (_, module) in modules.items():
        params = [p for p in module.parameters() if p.requires_grad]
        if steps and params:
            optimizer = torch.optim.Adam(params, lr=lr)
            optimizers[key] = (optimizer, torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps))
    for _ in range(steps if optimizers else 0):
        rows = torch.randint(0, len(tokens), (min(batch, len(tokens)),), generator=generator)
        acts = layer_activations(nas_model, tokens[rows], layer, context)
        for key, (optimizer, schedule) in optimizers.items():
            part, module = modules[key]
            inputs, targets = acts[part]
            loss = normalised_mse(run_subblock(module, part, inputs, context), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
    after = evaluate_layer(nas_model, layer, modules, probe, context, batch)
    results = {}
    for key, (_, module) in modules.items():
        if after[key] > before[key]:
            module.load_state_dict(initial[key])
            after[key] = before[key]
        results[key] = (before[key], after[key])
    return results
