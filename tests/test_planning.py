"""``reasonrl plan``'s arithmetic (reasonrl/planning.py) against hand counts."""

from __future__ import annotations

import json

import pytest

from reasonrl.errors import UserError
from reasonrl.planning import Layout, megatron_shares, model_shape, plan_roles
from reasonrl.smoke.model import TinyModelSpec, model_config
from reasonrl.smoke.tokenizer import VOCABULARY, build_tokenizer


@pytest.fixture(scope="module")
def smoke():
    """The CPU smoke model's config (reasonrl/smoke): Qwen2, tied embeddings."""
    config = model_config(TinyModelSpec(), build_tokenizer())
    return config, model_shape(config)


SPEC = TinyModelSpec()
V, H, L, I = len(VOCABULARY), SPEC.hidden_size, SPEC.num_layers, SPEC.intermediate_size  # noqa: E741
KV = SPEC.num_kv_heads * H // SPEC.num_heads  # the key/value width (GQA)
# one layer by hand: q, k, v with their bias (Qwen2), o without; gate, up, down; two norms
LAYER_SPLIT = (H * H + H) + 2 * (H * KV + KV) + H * H + 3 * H * I  # split by TP
LAYER_WHOLE = 2 * H  # the norms, whole on every TP rank
LAYER = LAYER_SPLIT + LAYER_WHOLE


def test_the_smoke_models_parameters_equal_a_hand_count_and_the_built_model(smoke):
    from transformers import AutoModelForCausalLM

    config, shape = smoke
    total = sum(p.numel for p in shape.parameters)
    assert total == V * H + L * LAYER + H  # embedding (tied: no output layer), layers, final norm
    assert total == sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())
    assert shape.tied and shape.layers == L


def test_megatron_pipeline_stages_hold_the_embedding_first_and_its_tied_copy_last(smoke):
    _config_, shape = smoke
    layout = Layout(engine="megatron", nodes=1, devices_per_node=4, tp=1, pp=2)
    first, last = megatron_shares(shape.parameters, L, tied=True, layout=layout)
    assert first.total == V * H + LAYER
    assert last.total == LAYER + V * H + H  # layer 1, the tied output layer's copy, the final norm
    actor, rollout = plan_roles(shape, layout)
    # the fullest device (last stage): bf16 weights, fp32 main grads, 12 B of Adam state over DP 2
    assert (actor.weights, actor.gradients, actor.optimizer) == (2 * last.total, 4 * last.total, 12 * last.total / 2)
    assert actor.devices == 4 and actor.layout.startswith("TP 1 · PP 2 · CP 1 · DP 2")
    assert rollout.weights == 2 * (V * H + L * LAYER + H)  # one device per replica, bf16


def test_megatron_tensor_parallel_splits_linear_layers_and_vocabulary_keeps_norms_whole(smoke):
    config, shape = smoke
    with pytest.raises(UserError, match=f"a vocabulary of {V} does not split over TP 2"):
        megatron_shares(shape.parameters, L, True, Layout(engine="megatron", nodes=1, devices_per_node=2, tp=2))
    config.vocab_size = 64  # as Megatron would pad it
    padded = model_shape(config).parameters
    (only,) = megatron_shares(padded, L, True, Layout(engine="megatron", nodes=1, devices_per_node=2, tp=2))
    assert only.total == 64 * H / 2 + L * (LAYER_SPLIT / 2 + LAYER_WHOLE) + H


def test_fsdp_shards_everything_and_counts_fp32_adam(smoke):
    _config_, shape = smoke
    total = V * H + L * LAYER + H
    layout = Layout(engine="fsdp", nodes=1, devices_per_node=4, weight_bytes=4, grad_bytes=4, rollout_tp=2)
    actor, rollout = plan_roles(shape, layout)
    assert (actor.weights, actor.gradients, actor.optimizer) == (total, total, 2 * total)  # 4 B × total / 4 each
    assert rollout.weights == 2 * total / 2 and rollout.layout.startswith("2 replicas × TP 2")


def test_experts_split_over_expert_parallel_and_the_router_stays_whole():
    from transformers import MixtralConfig

    h, i, experts, vocab = 32, 64, 4, 64
    config = MixtralConfig(
        vocab_size=vocab,
        hidden_size=h,
        intermediate_size=i,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=experts,
        num_experts_per_tok=2,
    )
    shape = model_shape(config)
    parameters = shape.parameters
    attention = h * h + 2 * h * (h // 2) + h * h  # q, k, v (2 KV heads of 8), o; no bias
    layout = Layout(engine="megatron", nodes=1, devices_per_node=4, tp=2, ep=2, etp=1)
    (share,) = megatron_shares(parameters, 2, tied=False, layout=layout)
    assert share.expert == 2 * experts * 3 * h * i / 2  # per layer: gate, up, down of each expert, over EP 2
    router, norms = experts * h, 2 * h
    assert share.dense == vocab * h / 2 + 2 * (attention / 2 + router + norms) + h + vocab * h / 2
    actor, _rollout = plan_roles(shape, layout)
    # Adam state: dense parameters over DP 2 (4 devices / TP 2), experts over expert DP 2 (4 / EP 2)
    assert actor.optimizer == 12 * (share.dense / 2 + share.expert / 2)
    with pytest.raises(UserError, match="4 experts do not split over EP 8"):
        megatron_shares(parameters, 2, False, Layout(engine="megatron", nodes=1, devices_per_node=8, ep=8, etp=1))


def test_a_layout_that_does_not_divide_the_devices_or_an_unknown_dtype_is_named():
    layout = Layout(engine="megatron", nodes=1, devices_per_node=6, tp=4)
    with pytest.raises(UserError, match="6 devices are not a multiple of tp × pp × cp = 4"):
        layout.check()
    with pytest.raises(UserError, match="6 devices are not a multiple of fsdp_size = 4"):
        Layout(engine="fsdp", nodes=1, devices_per_node=6, fsdp_size=4).check()
    from omegaconf import OmegaConf

    from reasonrl.planning import layout_of

    config = OmegaConf.create({"actor_rollout_ref": {"actor": {"strategy": "megatron"}, "rollout": {"dtype": "fp8"}}})
    with pytest.raises(UserError, match="actor_rollout_ref.rollout.dtype: dtype 'fp8'"):
        layout_of(config)


def test_plan_reads_the_layout_from_a_cluster_preset_and_prints_the_table(tmp_path, capsys):
    from transformers import Qwen2Config

    from reasonrl.cli.main import main

    # 2 layers per stage of PP 18; a vocabulary and heads TP 8 splits
    config = Qwen2Config(
        vocab_size=512, hidden_size=256, num_hidden_layers=36, num_attention_heads=8, num_key_value_heads=8
    )
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config.to_dict()))
    assert main(["plan", "recipe=nemotron", "+preset=cluster_nemotron", f"model={path}"]) == 0
    out = capsys.readouterr().out
    assert "recipe nemotron, preset cluster_nemotron" in out
    actor = next(line for line in out.splitlines() if line.startswith("actor"))
    assert actor.split()[1] == "288" and "TP 8 · PP 18 · CP 2 · DP 1 · SP" in actor, out
    assert "36 replicas × TP 8" in out
