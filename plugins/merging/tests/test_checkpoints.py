"""The streaming checkpoint merge: equal to the in-memory rules on real (tiny) Hugging Face
checkpoints, sharded or not, float32 and bf16; ``reasonrl merge --config``; bad inputs stop it
before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from reasonrl.api import fuse_task_vectors
from reasonrl.cli.main import main as reasonrl_main
from reasonrl.plugins.merging.fusion import average_tensors, task_arithmetic_tensor


def tiny_checkpoint(folder: Path, seed: int, dtype=torch.float32, shard: str | None = None, hidden: int = 32) -> Path:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)  # the same architecture and base weights for every seed ...
    config = Qwen2Config(
        vocab_size=64,
        hidden_size=hidden,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    model = Qwen2ForCausalLM(config).to(dtype)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # ... and each seed its own task vector
        for parameter in model.parameters():
            if seed:
                parameter.add_(torch.randn(parameter.shape, generator=generator).to(dtype) * 0.02)
    model.save_pretrained(folder, safe_serialization=True, **({"max_shard_size": shard} if shard else {}))
    return folder


def state(folder: Path) -> dict[str, torch.Tensor]:
    out = {}
    for file in sorted(folder.glob("*.safetensors")):
        out.update(load_file(file))
    return out


def write_yaml(path: Path, **values) -> Path:
    path.write_text(yaml.safe_dump(values))
    return path


@pytest.mark.parametrize("dtype, shard, chunk", [(torch.float32, None, None), (torch.bfloat16, "20KB", 100)])
def test_streamed_fusion_equals_the_in_memory_facade(tmp_path, monkeypatch, dtype, shard, chunk):
    if chunk:  # tensors of many chunks: each read, merged and written as a byte range
        from reasonrl.plugins.merging import fusion

        monkeypatch.setattr(fusion, "CHUNK", chunk)
    base = tiny_checkpoint(tmp_path / "base", 0, dtype, shard)
    experts = [tiny_checkpoint(tmp_path / f"e{i}", i, dtype, shard) for i in (1, 2, 3)]
    if shard:
        assert len(list(base.glob("*.safetensors"))) > 1 and (base / "model.safetensors.index.json").exists()
    knobs = {"normalize": True, "drop_rate": 0.3, "erase": True, "seed": 5, "scale": 0.8}
    config = write_yaml(
        tmp_path / "merge.yaml", method="fusion", base="base", experts=["e1", "e2", "e3"], output="fused", **knobs
    )
    assert reasonrl_main(["merge", "--config", str(config)]) == 0
    merged = state(tmp_path / "fused")
    expected = fuse_task_vectors(state(base), [state(e) for e in experts], **knobs)
    assert merged.keys() == expected.keys()
    for name, tensor in expected.items():
        assert merged[name].dtype == dtype and torch.equal(merged[name], tensor), name
    assert sorted(p.name for p in (tmp_path / "fused").iterdir()) == sorted(p.name for p in base.iterdir())
    assert not list(tmp_path.glob(".fused.partial-*"))


def test_averaging_and_task_arithmetic_through_the_cli(tmp_path):
    models = [tiny_checkpoint(tmp_path / f"m{i}", i) for i in range(3)]
    config = write_yaml(tmp_path / "avg.yaml", method="average", experts=["m1", "m2"], weights=[3, 1], output="avg")
    assert reasonrl_main(["merge", "--config", str(config)]) == 0
    one, two = state(models[1]), state(models[2])
    for name, tensor in state(tmp_path / "avg").items():
        assert torch.equal(tensor, average_tensors([one[name], two[name]], [3, 1]))
    config = write_yaml(
        tmp_path / "ta.yaml", method="task_arithmetic", base="m0", experts=["m1", "m2"], scale=0.5, output="ta"
    )
    assert reasonrl_main(["merge", "--config", str(config)]) == 0
    zero = state(models[0])
    for name, tensor in state(tmp_path / "ta").items():
        assert torch.equal(tensor, task_arithmetic_tensor(zero[name], [one[name], two[name]], 0.5))


@pytest.mark.parametrize(
    "change, named",
    [
        ({"drop_rate": 1.0}, "merge.drop_rate"),
        ({"drop_rate": -0.2}, "merge.drop_rate"),
        ({"method": "average", "base": None, "experts": ["e1"]}, "merge.experts"),  # n < 2
        ({"method": "median"}, "merge.method"),
        ({"base": None}, "merge.base"),
        ({"experts": ["other"]}, "other/config.json"),  # another architecture
        ({"experts": ["wide"]}, "has shape"),  # same architecture, other shapes
    ],
)
def test_bad_inputs_stop_before_anything_is_written(tmp_path, capsys, change, named):
    tiny_checkpoint(tmp_path / "base", 0)
    tiny_checkpoint(tmp_path / "e1", 1)
    tiny_checkpoint(tmp_path / "wide", 2, hidden=48)
    other = tiny_checkpoint(tmp_path / "other", 3)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(
        json.dumps({**config, "architectures": ["LlamaForCausalLM"], "model_type": "llama"})
    )
    values = {"method": "fusion", "base": "base", "experts": ["e1"], "output": "out", **change}
    config_file = write_yaml(tmp_path / "merge.yaml", **{k: v for k, v in values.items() if v is not None})
    assert reasonrl_main(["merge", "--config", str(config_file)]) == 2
    assert named in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.partial-*")), "nothing written"


def test_an_existing_output_is_never_overwritten(tmp_path, capsys):
    tiny_checkpoint(tmp_path / "base", 0)
    tiny_checkpoint(tmp_path / "e1", 1)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    config = write_yaml(tmp_path / "merge.yaml", method="fusion", base="base", experts=["e1"], output="out")
    assert reasonrl_main(["merge", "--config", str(config)]) == 2
    assert "not empty" in capsys.readouterr().err and (tmp_path / "out" / "keep.txt").read_text() == "mine"
