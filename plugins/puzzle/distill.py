"""Blockwise local distillation (Llama-Nemotron §2, SPEC §6.1): each library subblock learns to
reproduce its parent subblock's output from the parent's own input activations (teacher
forcing), with a normalised MSE, independently of every other subblock — so the work splits
across processes (Ray tasks when ``workers > 1``) and resumes subblock by subblock.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from reasonrl.plugins.puzzle.subblocks import AttentionContext, run_subblock


@dataclass
class Activations:
    """Per layer, on a batch of sequences: the parent's residual stream into the attention
    subblock and its output, into the FFN subblock and its output."""

    attention_in: list[torch.Tensor]
    attention_out: list[torch.Tensor]
    ffn_in: list[torch.Tensor]
    ffn_out: list[torch.Tensor]

    def pair(self, layer: int, part: str) -> tuple[torch.Tensor, torch.Tensor]:
        return (self.attention_in[layer], self.attention_out[layer]) if part == "attention" else (self.ffn_in[layer], self.ffn_out[layer])


@torch.no_grad()
def capture(nas_model, input_ids: torch.Tensor, batch: int = 32) -> Activations:
    acts = Activations([], [], [], [])
    model = nas_model.model
    context = AttentionContext(model, input_ids.shape[1])
    chunks = []
    for start in range(0, len(input_ids), batch):
        hidden = model.embed_tokens(input_ids[start:start + batch])
        per_layer = []
        for layer in model.layers:
            attention = layer.attention_delta(hidden, **context(hidden))
            middle = hidden + attention
            ffn = layer.ffn_delta(middle)
            per_layer.append((hidden, attention, middle, ffn))
            hidden = middle + ffn
        chunks.append(per_layer)
    for index in range(len(model.layers)):
        acts.attention_in.append(torch.cat([c[index][0] for c in chunks]))
        acts.attention_out.append(torch.cat([c[index][1] for c in chunks]))
        acts.ffn_in.append(torch.cat([c[index][2] for c in chunks]))
        acts.ffn_out.append(torch.cat([c[index][3] for c in chunks]))
    return acts


def normalised_mse(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return ((prediction - target) ** 2).mean() / (target ** 2).mean().clamp_min(1e-12)


def distill_subblock(module, part: str, inputs: torch.Tensor, targets: torch.Tensor, context: AttentionContext,
                     steps: int, lr: float, batch: int, seed: int) -> tuple[float, float]:
    """Train ``module`` in place; returns its normalised MSE before and after (whole set). When
    training did not improve on the initialisation (e.g. a least-squares linear map), the
    initial weights are kept."""
    generator = torch.Generator().manual_seed(seed)
    initial = {k: v.detach().clone() for k, v in module.state_dict().items()}
    with torch.no_grad():
        before = normalised_mse(run_subblock(module, part, inputs, context), targets).item()
    trainable = [p for p in module.parameters() if p.requires_grad]
    if steps and trainable:
        optimizer = torch.optim.Adam(trainable, lr=lr)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
        for _ in range(steps):
            rows = torch.randint(0, len(inputs), (min(batch, len(inputs)),), generator=generator)
            loss = normalised_mse(run_subblock(module, part, inputs[rows], context), targets[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
    with torch.no_grad():
        after = normalised_mse(run_subblock(module, part, inputs, context), targets).item()
    if after > before:
        module.load_state_dict(initial)
        after = before
    return before, after


def done_marker(path: Path) -> Path:
    return path.with_suffix(".json")
