"""The MTP module and loss against an independent implementation written from the equations
(a loop over positions on truncated sequences, its own norms), random weights, D = 1 and 3;
the λ schedule at its boundary."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from reasonrl.plugins.mtp.core import MTPLayer, WeightSchedule, mtp_forward, total_loss

H, V = 16, 23


class CausalBlock(nn.Module):
    """A small causal decoder block (attention + MLP) standing in for the host's layer."""

    def __init__(self):
        super().__init__()
        self.attention = nn.MultiheadAttention(H, 2, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(H, 32), nn.SiLU(), nn.Linear(32, H))

    def forward(self, x):
        length = x.shape[1]
        mask = torch.triu(torch.ones(length, length, dtype=torch.bool), 1)
        x = x + self.attention(x, x, x, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(x)


def reference_rms(x, weight, eps=1e-6):
    return weight * x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)


def reference_mtp_losses(layers, main_hidden, tokens, embed, head):
    """From the equations: depth k on the sequence truncated to the positions i with t_{i+k+1}."""
    losses, previous = [], main_hidden
    length = tokens.shape[1]
    for k, layer in enumerate(layers, start=1):
        keep = length - k  # positions with a token t_{i+k}
        combined = torch.cat(
            [
                reference_rms(previous[:, :keep], layer.hidden_layernorm.weight),
                reference_rms(embed(tokens[:, k : k + keep]), layer.token_layernorm.weight),
            ],
            -1,
        )
        hidden = layer.block(combined @ layer.input_proj.weight.T)
        logits = head(reference_rms(hidden, layer.final_layernorm.weight))
        log_probs = torch.log_softmax(logits, -1)
        terms = [-log_probs[b, i, tokens[b, i + k + 1]] for b in range(tokens.shape[0]) for i in range(length - k - 1)]
        losses.append(torch.stack(terms).mean())
        previous = hidden
    return losses


@pytest.mark.parametrize("depth", [1, 3])
def test_mtp_equals_the_equations(depth):
    torch.manual_seed(depth)
    embed, head = nn.Embedding(V, H), nn.Linear(H, V, bias=False)
    layers = nn.ModuleList([MTPLayer(H, CausalBlock()) for _ in range(depth)])
    with torch.no_grad():
        for layer in layers:
            for norm in (layer.hidden_layernorm, layer.token_layernorm, layer.final_layernorm):
                norm.weight.uniform_(0.5, 1.5)
    tokens = torch.randint(0, V, (3, 12))
    main_hidden = torch.randn(3, 12, H)
    ours = mtp_forward(layers, main_hidden, tokens, embed, head)
    expected = reference_mtp_losses(copy.deepcopy(layers), main_hidden, tokens, embed, head)
    assert len(ours.losses) == depth
    for got, want in zip(ours.losses, expected):
        assert torch.allclose(got, want, atol=1e-5), (got, want)
    main_loss = torch.tensor(2.0)
    assert torch.allclose(
        total_loss(main_loss, ours.losses, 0.3), main_loss + 0.3 * torch.stack(expected).mean(), atol=1e-5
    )


def test_gradients_reach_the_mtp_layers_and_the_shared_head():
    torch.manual_seed(0)
    embed, head = nn.Embedding(V, H), nn.Linear(H, V, bias=False)
    layers = nn.ModuleList([MTPLayer(H, CausalBlock()) for _ in range(2)])
    out = mtp_forward(layers, torch.randn(2, 8, H), torch.randint(0, V, (2, 8)), embed, head)
    total_loss(torch.tensor(0.0), out.losses, 0.1).backward()
    assert (
        layers[1].input_proj.weight.grad.abs().sum() > 0
        and head.weight.grad.abs().sum() > 0
        and embed.weight.grad.abs().sum() > 0
    )


def test_weight_schedule_switches_exactly_at_its_boundary():
    schedule = WeightSchedule(initial=0.3, later=0.1, switch_at=1000)
    assert schedule.at(999) == 0.3 and schedule.at(1000) == 0.1 and schedule.at(5000) == 0.1
    assert WeightSchedule(switch_at=0).at(10**9) == 0.3
    with pytest.raises(ValueError, match="must be >= 0"):
        WeightSchedule(initial=-0.1)
    with pytest.raises(ValueError, match="must be >= 0"):
        total_loss(torch.tensor(1.0), [torch.tensor(1.0)], -1.0)


def test_layer_names_follow_mimos_checkpoint_layout():
    names = set(MTPLayer(H, CausalBlock()).state_dict())
    assert {"token_layernorm.weight", "hidden_layernorm.weight", "input_proj.weight", "final_layernorm.weight"} <= names
    assert "attention.in_proj_weight" in names and not any(name.startswith("block.") for name in names)
