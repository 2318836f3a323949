"""FFN Fusion (Llama-Nemotron §2, LN-Ultra): a run of consecutive layers whose attention is removed
becomes one layer whose FFN is the concatenation of the run's FFNs — exactly the sum of their
outputs on the run's *input* ("parallel" execution of the run). Each FFN's RMSNorm weight is
folded into its gate and up projections, so the fused layer's norm has unit weight. The
approximation is the step from sequential to parallel; the rewrite itself is exact.
"""

from __future__ import annotations

import torch

from reasonrl.plugins.puzzle.block_config import (
    AttentionConfig,
    BlockConfig,
    FFNConfig,
    ffn_mult_for,
    intermediate_size,
)


def fusable_runs(blocks: list[BlockConfig], min_length: int = 2) -> list[tuple[int, int]]:
    """[start, end) of maximal runs of layers with no attention and a SwiGLU (or no) FFN that
    hold at least ``min_length`` SwiGLU FFNs."""
    runs, start = [], None
    for index, block in enumerate(blocks + [None]):
        fusable = block is not None and block.attention.no_op and block.ffn.kind in ("ffn", "no_op")
        if fusable and start is None:
            start = index
        if not fusable and start is not None:
            if sum(blocks[i].ffn.kind == "ffn" for i in range(start, index)) >= min_length:
                runs.append((start, index))
            start = None
    return runs


def fuse(
    blocks: list[BlockConfig], layer_states: list[dict[str, torch.Tensor]], hidden_size: int
) -> tuple[list[BlockConfig], list[dict[str, torch.Tensor]]]:
    """Blocks and per-layer weights with every fusable run replaced by one layer."""
    runs = fusable_runs(blocks)
    new_blocks, new_states, index = [], [], 0
    for start, end in runs + [(len(blocks), len(blocks))]:
        new_blocks += blocks[index:start]
        new_states += layer_states[index:start]
        if start == end:
            break
        members = [i for i in range(start, end) if blocks[i].ffn.kind == "ffn"]
        gate, up, down = [], [], []
        for i in members:
            state = layer_states[i]
            norm = state["post_attention_layernorm.weight"]
            gate.append(state["mlp.gate_proj.weight"] * norm)
            up.append(state["mlp.up_proj.weight"] * norm)
            down.append(state["mlp.down_proj.weight"])
        width = sum(intermediate_size(blocks[i].ffn.ffn_mult, hidden_size) for i in members)
        new_blocks.append(
            BlockConfig(AttentionConfig(no_op=True), FFNConfig(ffn_mult=ffn_mult_for(width, hidden_size)))
        )
        new_states.append(
            {
                "post_attention_layernorm.weight": torch.ones(hidden_size, dtype=gate[0].dtype),
                "mlp.gate_proj.weight": torch.cat(gate),
                "mlp.up_proj.weight": torch.cat(up),
                "mlp.down_proj.weight": torch.cat(down, dim=1),
            }
        )
        index = end
    return new_blocks, new_states


def parallel_run_output(layers, hidden: torch.Tensor) -> torch.Tensor:
    """The run executed in parallel: input + Σ FFN_i(input) (what the fused layer computes)."""
    return hidden + sum(layer.ffn_delta(hidden) for layer in layers)
