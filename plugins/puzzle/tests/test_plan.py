"""``reasonrl plan`` (the core's reasonrl/planning.py) on a Puzzle child: its parameters are
the heterogeneous blocks' own (a no-op block holds none), counted here by hand."""

from __future__ import annotations

from transformers import LlamaConfig

from reasonrl.planning import Layout, megatron_shares, model_shape, plan_roles
from reasonrl.plugins.puzzle.library import AttentionVariant, FfnVariant, block_config
from reasonrl.plugins.puzzle.model import register_with_transformers
from reasonrl.plugins.puzzle.subblocks import nas_config

V, H, HEADS = 40, 128, 4
HEAD_DIM = H // HEADS


def child_config():
    register_with_transformers()
    parent = LlamaConfig(
        vocab_size=V, hidden_size=H, num_attention_heads=HEADS, num_hidden_layers=4, num_key_value_heads=4
    )
    blocks = [
        block_config(AttentionVariant("attention", 4), FfnVariant("ffn", 512), HEADS, H),  # the parent's block
        block_config(AttentionVariant("attention", 1), FfnVariant("ffn", 256), HEADS, H),  # 1 KV head, narrower FFN
        block_config(AttentionVariant("linear"), FfnVariant("linear"), HEADS, H),
        block_config(AttentionVariant("no_op"), FfnVariant("no_op"), HEADS, H),
    ]
    return nas_config(parent, blocks)


def attention(kv_heads: int) -> int:
    return 2 * H * H + 2 * H * kv_heads * HEAD_DIM  # q, o; k, v (no bias)


LAYERS = [
    H + attention(4) + H + 3 * H * 512,  # norm, attention, norm, gate/up/down
    H + attention(1) + H + 3 * H * 256,
    H + H * H + H + H * H,  # linear replacements, each after its norm
    0,  # a no-op block: nothing
]


def test_a_puzzle_childs_parameters_and_pipeline_stages_equal_a_hand_count():
    config = child_config()
    shape = model_shape(config)
    parameters = shape.parameters
    assert not shape.tied and shape.layers == 4, "the no-op block is a layer of its own"
    assert sum(p.numel for p in parameters) == V * H + sum(LAYERS) + H + V * H  # + final norm, output layer
    layout = Layout(engine="megatron", nodes=1, devices_per_node=2, pp=2)
    first, last = megatron_shares(parameters, 4, tied=False, layout=layout)
    assert first.total == V * H + LAYERS[0] + LAYERS[1]
    assert last.total == LAYERS[2] + LAYERS[3] + H + V * H
    actor, _rollout = plan_roles(shape, layout)
    fullest = max(first.total, last.total)
    assert (actor.weights, actor.gradients, actor.optimizer) == (2 * fullest, 4 * fullest, 12 * fullest)
