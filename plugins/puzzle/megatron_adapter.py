"""megatron-core adapter: the exported child as a ``GPTModel`` on megatron-core's own
heterogeneous layer specs (``get_gpt_heterogeneous_layer_spec``), configured from the child's
``config.json`` (its ``block_configs`` read by ``HeterogeneousTransformerConfig``), weights
converted from the Hugging Face names. Local (non-Transformer-Engine) modules, so it runs on
CPU; needs ``megatron.core.parallel_state`` initialised (one process is enough).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch


def megatron_config(hf_config: dict):
    import torch.nn.functional as F
    from megatron.core.transformer.heterogeneous.heterogeneous_config import HeterogeneousTransformerConfig

    return HeterogeneousTransformerConfig(
        num_layers=hf_config["num_hidden_layers"],
        hidden_size=hf_config["hidden_size"],
        num_attention_heads=hf_config["num_attention_heads"],
        ffn_hidden_size=hf_config.get("intermediate_size") or 4 * hf_config["hidden_size"],
        normalization="RMSNorm",
        layernorm_epsilon=hf_config["rms_norm_eps"],
        gated_linear_unit=True,
        activation_func=F.silu,
        add_bias_linear=False,
        add_qkv_bias=False,
        bias_activation_fusion=False,
        masked_softmax_fusion=False,
        persist_layer_norm=False,
        bias_dropout_fusion=False,
        apply_rope_fusion=False,
        attention_dropout=0.0,
        hidden_dropout=0.0,
        use_cpu_initialization=True,
        perform_initialization=False,
        params_dtype=torch.float32,
        heterogeneous_layers_config_encoded_json=json.dumps(hf_config),
    )


def _qkv(state, prefix: str, heads: int, groups: int, head_dim: int) -> torch.Tensor:
    """Megatron's fused QKV rows: per query group, its query heads, then its key, then its value."""
    q = state[f"{prefix}q_proj.weight"].reshape(groups, heads // groups * head_dim, -1)
    k = state[f"{prefix}k_proj.weight"].reshape(groups, head_dim, -1)
    v = state[f"{prefix}v_proj.weight"].reshape(groups, head_dim, -1)
    return torch.cat([q, k, v], dim=1).reshape(-1, q.shape[-1])


def convert_state(hf_state: dict[str, torch.Tensor], hf_config: dict) -> dict[str, torch.Tensor]:
    heads, hidden = hf_config["num_attention_heads"], hf_config["hidden_size"]
    head_dim = hf_config.get("head_dim") or hidden // heads
    out = {
        "embedding.word_embeddings.weight": hf_state["model.embed_tokens.weight"],
        "decoder.final_layernorm.weight": hf_state["model.norm.weight"],
        "output_layer.weight": hf_state["lm_head.weight"],
    }
    for i, block in enumerate(hf_config["block_configs"]):
        src, dst = f"model.layers.{i}.", f"decoder.layers.{i}."
        attention, ffn = block["attention"], block["ffn"]
        if attention["replace_with_linear"]:
            out[dst + "self_attention.weight"] = hf_state[src + "self_attn.linear_attn.weight"]
            out[dst + "input_layernorm.weight"] = hf_state[src + "input_layernorm.weight"]
        elif not attention["no_op"]:
            out[dst + "input_layernorm.weight"] = hf_state[src + "input_layernorm.weight"]
            out[dst + "self_attention.linear_qkv.weight"] = _qkv(
                hf_state, src + "self_attn.", heads, heads // attention["n_heads_in_group"], head_dim
            )
            out[dst + "self_attention.linear_proj.weight"] = hf_state[src + "self_attn.o_proj.weight"]
        if ffn["replace_with_linear"]:
            out[dst + "mlp.weight"] = hf_state[src + "mlp.linear_mlp.weight"]
            out[dst + "pre_mlp_layernorm.weight"] = hf_state[src + "post_attention_layernorm.weight"]
        elif not ffn["no_op"]:
            out[dst + "pre_mlp_layernorm.weight"] = hf_state[src + "post_attention_layernorm.weight"]
            out[dst + "mlp.linear_fc1.weight"] = torch.cat(
                [hf_state[src + "mlp.gate_proj.weight"], hf_state[src + "mlp.up_proj.weight"]]
            )
            out[dst + "mlp.linear_fc2.weight"] = hf_state[src + "mlp.down_proj.weight"]
    return out


def load_weights(checkpoint_dir: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of a Hugging Face checkpoint folder (all its ``*.safetensors`` shards)."""
    from safetensors.torch import load_file

    state = {}
    for shard in sorted(Path(checkpoint_dir).glob("*.safetensors")):
        state.update(load_file(str(shard)))
    return state


def hf_state_from_megatron(state: dict[str, torch.Tensor], hf_config: dict) -> dict[str, torch.Tensor]:
    """The inverse of :func:`convert_state`: megatron-core names back to the nemotron-nas ones
    (the NeMo adapter's export). Extra rows of a padded vocabulary are cut to ``vocab_size``."""
    heads, hidden, vocab = hf_config["num_attention_heads"], hf_config["hidden_size"], hf_config["vocab_size"]
    head_dim = hf_config.get("head_dim") or hidden // heads
    out = {
        "model.embed_tokens.weight": state["embedding.word_embeddings.weight"][:vocab],
        "model.norm.weight": state["decoder.final_layernorm.weight"],
        "lm_head.weight": state["output_layer.weight"][:vocab],
    }
    for i, block in enumerate(hf_config["block_configs"]):
        src, dst = f"decoder.layers.{i}.", f"model.layers.{i}."
        attention, ffn = block["attention"], block["ffn"]
        if attention["replace_with_linear"]:
            out[dst + "self_attn.linear_attn.weight"] = state[src + "self_attention.weight"]
        elif not attention["no_op"]:
            groups = heads // attention["n_heads_in_group"]
            qkv = state[src + "self_attention.linear_qkv.weight"].reshape(groups, (heads // groups + 2) * head_dim, -1)
            q, k, v = qkv.split([heads // groups * head_dim, head_dim, head_dim], dim=1)
            out[dst + "self_attn.q_proj.weight"] = q.reshape(-1, hidden)
            out[dst + "self_attn.k_proj.weight"] = k.reshape(-1, hidden)
            out[dst + "self_attn.v_proj.weight"] = v.reshape(-1, hidden)
            out[dst + "self_attn.o_proj.weight"] = state[src + "self_attention.linear_proj.weight"]
        if not attention["no_op"]:
            out[dst + "input_layernorm.weight"] = state[src + "input_layernorm.weight"]
        if ffn["replace_with_linear"]:
            out[dst + "mlp.linear_mlp.weight"] = state[src + "mlp.weight"]
        elif not ffn["no_op"]:
            gate, up = state[src + "mlp.linear_fc1.weight"].chunk(2)
            out[dst + "mlp.gate_proj.weight"], out[dst + "mlp.up_proj.weight"] = gate, up
            out[dst + "mlp.down_proj.weight"] = state[src + "mlp.linear_fc2.weight"]
        if not ffn["no_op"]:
            out[dst + "post_attention_layernorm.weight"] = state[src + "pre_mlp_layernorm.weight"]
    return {name: tensor.contiguous() for name, tensor in out.items()}


def _cpu_rotary_embedding(model):
    """megatron-core 0.16.1's RotaryEmbedding moves its frequencies to CUDA on first use; on a
    machine without CUDA the same module is used as built (on CPU), nothing else changes."""
    from reasonrl.compat.megatron import use_host_rotary

    if not torch.cuda.is_available():
        use_host_rotary(model)


def child_layer_spec(hf_config: dict, use_te: bool = False):
    """megatron-core's layer specs for a Puzzle child, one per block (no-op, linear and GQA
    variants): the spec registered as ``reasonrl.api.megatron_layer_spec("puzzle_child",
    hf_config=...)`` — what a NeMo/Megatron model builder takes. Needs megatron's parallel state."""
    from megatron.core.models.gpt.heterogeneous.heterogeneous_layer_specs import get_gpt_heterogeneous_layer_spec

    return get_gpt_heterogeneous_layer_spec(megatron_config(hf_config), use_te=use_te)


def load_child(child_dir: str | Path):
    """The exported child as a megatron-core ``GPTModel`` (eval mode) with its weights."""
    from megatron.core.models.gpt import GPTModel

    from reasonrl.api import megatron_layer_spec

    child_dir = Path(child_dir)
    hf_config = json.loads((child_dir / "config.json").read_text())
    config = megatron_config(hf_config)
    rope = hf_config.get("rope_parameters") or {}
    model = GPTModel(
        config=config,
        transformer_layer_spec=megatron_layer_spec("puzzle_child", hf_config=hf_config),  # the registered spec
        vocab_size=hf_config["vocab_size"],
        max_sequence_length=hf_config["max_position_embeddings"],
        position_embedding_type="rope",
        rotary_base=rope.get("rope_theta", hf_config.get("rope_theta", 10000.0)),
        share_embeddings_and_output_weights=False,
    )
    _cpu_rotary_embedding(model)
    converted = convert_state(load_weights(child_dir), hf_config)
    missing, unexpected = model.load_state_dict(converted, strict=False)
    missing = [k for k in missing if not k.endswith("._extra_state")]
    if missing or unexpected:
        raise RuntimeError(f"megatron-core state mismatch: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return model.eval()


def _host_attention_buffer(elements: int, dtype: torch.dtype) -> None:
    """megatron-core's local attention takes its score buffer from a global buffer that it
    allocates on CUDA; without CUDA, hand it a host buffer of the size it will ask for."""
    from reasonrl.compat.megatron import host_attention_buffer

    if not torch.cuda.is_available():
        host_attention_buffer(elements, dtype)


@torch.no_grad()
def logits(model, input_ids: torch.Tensor) -> torch.Tensor:
    """[batch, sequence, vocab] logits of a causal forward (no padding)."""
    batch, length = input_ids.shape
    _host_attention_buffer(batch * model.config.num_attention_heads * length * length, model.config.params_dtype)
    position_ids = torch.arange(length).unsqueeze(0).expand_as(input_ids)
    # megatron's convention: True = masked; given explicitly (its default mask is built on CUDA)
    causal = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)[None, None]
    return model(input_ids=input_ids, position_ids=position_ids, attention_mask=causal)
