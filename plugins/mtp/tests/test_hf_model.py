"""MiMo's checkpoint layout with transformers: the registered class saves and loads its MTP layers
under ``model.mtp_layers.{k}.*`` with ``num_nextn_predict_layers``; ``mtp_outputs`` on a Hugging Face
model equals the core module on that model's own pieces; attaching to a Llama works too."""

from __future__ import annotations

import json

import torch
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from reasonrl.plugins.mtp.core import mtp_forward
from reasonrl.plugins.mtp.hf_model import MiMoConfig, MiMoForCausalLM, attach, register_with_transformers

SMALL = dict(
    vocab_size=40,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)


def test_checkpoint_round_trip_keeps_the_mtp_layers_in_mimo_layout(tmp_path):
    register_with_transformers()
    torch.manual_seed(0)
    model = MiMoForCausalLM(MiMoConfig(num_nextn_predict_layers=2, **SMALL))
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert (
        config["architectures"] == ["MiMoForCausalLM"]
        and config["num_nextn_predict_layers"] == 2
        and config["model_type"] == "mimo"
    )
    from safetensors.torch import load_file

    saved = load_file(tmp_path / "model.safetensors")
    for k in (0, 1):
        for name in (
            "token_layernorm.weight",
            "hidden_layernorm.weight",
            "input_proj.weight",
            "final_layernorm.weight",
            "self_attn.q_proj.weight",
            "mlp.gate_proj.weight",
            "input_layernorm.weight",
            "post_attention_layernorm.weight",
        ):
            assert f"model.mtp_layers.{k}.{name}" in saved
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert isinstance(loaded, MiMoForCausalLM) and isinstance(AutoConfig.from_pretrained(tmp_path), MiMoConfig)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, loaded.state_dict()[name]), name


def test_mtp_outputs_equal_the_core_on_the_models_own_pieces():
    torch.manual_seed(1)
    model = MiMoForCausalLM(MiMoConfig(num_nextn_predict_layers=3, **SMALL)).eval()
    tokens = torch.randint(0, 40, (2, 10))
    out = model.mtp_outputs(tokens)
    hidden = model.model(input_ids=tokens, output_hidden_states=True).hidden_states[-1]
    # hidden_states[-1] is the last decoder layer's output (before the final norm) in transformers 5
    positions = torch.arange(10).unsqueeze(0)
    mask = torch.full((10, 10), float("-inf")).triu(1)[None, None]
    expected = mtp_forward(
        model.model.mtp_layers,
        hidden,
        tokens,
        model.model.embed_tokens,
        model.lm_head,
        attention_mask=mask,
        position_embeddings=model.model.rotary_emb(hidden, positions),
        position_ids=positions,
    )
    for got, want in zip(out.mtp.losses, expected.losses):
        torch.testing.assert_close(got, want)
    main = torch.nn.functional.cross_entropy(
        model(input_ids=tokens).logits[:, :-1].reshape(-1, 40), tokens[:, 1:].reshape(-1)
    )
    torch.testing.assert_close(out.main_loss, main)


def test_attach_to_a_llama():
    torch.manual_seed(2)
    model = attach(LlamaForCausalLM(LlamaConfig(**SMALL)), 2)
    assert type(model.model.mtp_layers[0].block).__name__ == "LlamaDecoderLayer"
    from reasonrl.plugins.mtp.hf_model import mtp_outputs

    out = mtp_outputs(model, torch.randint(0, 40, (2, 9)))
    assert len(out.mtp.losses) == 2 and all(torch.isfinite(loss) for loss in out.mtp.losses)
    sum(out.mtp.losses).backward()
    assert model.model.mtp_layers[1].input_proj.weight.grad is not None


def test_verls_bridge_registers_mimo_by_name_and_transformers_finds_it_on_lookup(tmp_path):
    """``import verl`` registers MiMo with transformers without importing it (issue 48); a lookup
    finds it whichever comes first — transformers' registries or MiMo's config module — and from a
    config unpickled in the process (as a Ray worker receives it) too."""
    import pickle

    from reasonrl.testing.fresh_process import python_fresh

    MiMoForCausalLM(MiMoConfig(num_nextn_predict_layers=1, **SMALL)).save_pretrained(tmp_path)
    (tmp_path / "config.pkl").write_bytes(pickle.dumps(MiMoConfig(num_nextn_predict_layers=1, **SMALL)))
    lookups = {
        "loaded": f"m = AutoModelForCausalLM.from_pretrained({str(tmp_path)!r})",
        "config module first": f"import reasonrl.plugins.mtp.hf_config\nm = AutoModelForCausalLM.from_pretrained({str(tmp_path)!r})",
        "unpickled config": f"import pickle\nm = AutoModelForCausalLM.from_config(pickle.loads(open({str(tmp_path / 'config.pkl')!r}, 'rb').read()))",
    }
    for name, lookup in lookups.items():
        code = (
            "import sys, verl\nprint('reasonrl.plugins.mtp.hf_model' in sys.modules)\n"
            f"from transformers import AutoModelForCausalLM\n{lookup}\n"
            "from reasonrl.manager import load_errors\nprint(type(m).__name__, load_errors())\n"
        )
        result = python_fresh(code)
        assert result.returncode == 0, (name, result.stderr[-2000:])
        assert result.stdout.splitlines()[-2:] == ["False", "MiMoForCausalLM []"], (name, result.stdout[-500:])
