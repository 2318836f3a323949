"""Bad input to ``reasonrl merge`` and ``reasonrl domain-parallel`` is refused before any work,
named, with exit 2 and no traceback (issue 42): damaged safetensors files (truncated — a user's
merge of one reported success with ``model.norm.weight`` off by 1.64 —, a dtype or shape that
disagrees with the bytes, overlapping or padded data, a broken header), invalid YAML (named
``file:line``), an unknown recipe or a bad override (composed and validated in-process before
any stage; no ``outputs/`` folder left in the working directory)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch
import yaml
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from reasonrl.cli.main import main as reasonrl_main
from reasonrl.config import ConfigError
from reasonrl.errors import DEBUG_ENV, UserError
from reasonrl.plugins.merging.safetensors_io import read_header

CONFIG = {"architectures": ["TinyForCausalLM"], "model_type": "tiny"}


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv(DEBUG_ENV, raising=False)


def checkpoint(folder: Path, seed: int) -> Path:
    """A two-tensor Hugging Face style folder: config.json + model.safetensors (F32)."""
    generator = torch.Generator().manual_seed(seed)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    tensors = {
        "model.embed_tokens.weight": torch.randn(4, 3, generator=generator) * 0.02,
        "model.norm.weight": torch.ones(8) + torch.randn(8, generator=generator) * 0.02,
    }
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


def split(path: Path) -> tuple[dict, bytes]:
    """(header, data bytes) of a safetensors file."""
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + length]), raw[8 + length :]


def join(path: Path, header: dict, data: bytes) -> None:
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def last_tensor(header: dict) -> tuple[str, int]:
    """The tensor whose bytes come last, and where they end."""
    name = max((n for n in header if n != "__metadata__"), key=lambda n: header[n]["data_offsets"][1])
    return name, header[name]["data_offsets"][1]


def merge(tmp_path: Path, capsys) -> tuple[int, str]:
    config = tmp_path / "merge.yaml"
    config.write_text(yaml.safe_dump({"method": "fusion", "base": "base", "experts": ["e1"], "output": "out"}))
    code = reasonrl_main(["merge", "--config", str(config)])
    return code, capsys.readouterr().err


def test_a_truncated_safetensors_file_is_refused_naming_the_file_and_the_tensor(tmp_path, capsys):
    checkpoint(tmp_path / "base", 0)
    shard = checkpoint(tmp_path / "e1", 1) / "model.safetensors"
    header, _ = split(shard)
    name, end = last_tensor(header)
    full = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[:-6])  # as a copy cut short leaves it
    with pytest.raises(SafetensorError):  # safetensors itself refuses the file ...
        load_file(str(shard))
    code, err = merge(tmp_path, capsys)  # ... and so does the merge, before writing anything
    assert code == 2, err
    assert f"{shard}: truncated: tensor {name!r} ends at byte {full}, the file has {full - 6}" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.partial-*"))


def rewrite(path: Path, change) -> None:
    header, data = split(path)
    data = change(header, data)
    join(path, header, data)


def _dtype(header, data):
    header["model.norm.weight"]["dtype"] = "F16"  # 8 F32 = 32 bytes read as 8 F16 (16 bytes)
    return data


def _shape(header, data):
    header["model.embed_tokens.weight"]["shape"] = [4, 2]
    return data


def _overlap(header, data):
    name, end = last_tensor(header)
    other = next(n for n in header if n not in (name, "__metadata__"))
    header[name]["data_offsets"] = list(header[other]["data_offsets"])
    header[name]["shape"] = list(header[other]["shape"])
    return data[: max(e for n, e in ((n, header[n]["data_offsets"][1]) for n in header if n != "__metadata__"))]


def _padding(header, data):
    return data + b"\0" * 16


def _metadata(header, data):
    header["__metadata__"] = {"format": 3}
    return data


@pytest.mark.parametrize(
    "change, said",
    [
        (_dtype, "tensor 'model.norm.weight': dtype F16 × shape [8] is 16 bytes, its data_offsets"),
        (_shape, "tensor 'model.embed_tokens.weight': dtype F32 × shape [4, 2] is 32 bytes"),
        (_overlap, "overlaps tensor"),
        (_padding, "16 bytes after the last tensor"),
        (_metadata, "__metadata__ must map names to strings"),
    ],
)
def test_a_header_that_disagrees_with_the_bytes_is_refused(tmp_path, capsys, change, said):
    checkpoint(tmp_path / "base", 0)
    shard = checkpoint(tmp_path / "e1", 1) / "model.safetensors"
    rewrite(shard, change)
    code, err = merge(tmp_path, capsys)
    assert code == 2 and f"{shard}: " in err and said in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "raw, said",
    [
        (b"\x01\x02", "not even the 8-byte header length"),
        (struct.pack("<Q", 10**12) + b"{}", "over safetensors' limit"),
        (struct.pack("<Q", 64) + b"{}", "truncated: the header ends at byte 72, the file has 10"),
        (struct.pack("<Q", 8) + b"{not js}", "the header is not valid JSON"),
        (struct.pack("<Q", 8) + b"[1, 2]  ", "not an object of tensors"),
    ],
)
def test_a_broken_header_is_refused_naming_the_file(tmp_path, raw, said):
    path = tmp_path / "model.safetensors"
    path.write_bytes(raw)
    with pytest.raises(UserError, match=said) as error:
        read_header(path)
    assert error.value.subject == str(path)


def test_a_valid_file_reads_as_safetensors_wrote_it(tmp_path):
    shard = checkpoint(tmp_path / "m", 3) / "model.safetensors"
    entries = read_header(shard).entries
    assert {n: (e.dtype, e.shape) for n, e in entries.items()} == {
        n: ("F32", tuple(t.shape)) for n, t in load_file(str(shard)).items()
    }


def test_invalid_merge_yaml_is_named_with_its_line(tmp_path, capsys):
    config = tmp_path / "merge.yaml"
    config.write_text("method: fusion\nbase: base\nexperts: [e1, e2\noutput: out\n")
    assert reasonrl_main(["merge", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"reasonrl merge: {config}:4: invalid YAML") and "Traceback" not in err, err
    assert reasonrl_main(["merge", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert f"{tmp_path / 'missing.yaml'}: no such file" in capsys.readouterr().err


# ---------------------------------------------------------------- domain-parallel
def pipeline_yaml(folder: Path, **change) -> Path:
    for name in ("a", "b"):
        (folder / f"{name}.parquet").write_bytes(b"")  # exists; never read before the checks
    values = {
        "recipe": "longcat",
        "workdir": "runs",
        "domains": {name: {"train_files": f"{name}.parquet", "val_files": f"{name}.parquet"} for name in ("a", "b")},
        "overrides": ["+preset=cpu_tiny"],
        **change,
    }
    path = folder / "pipeline.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


@pytest.mark.parametrize(
    "change, said",
    [
        ({"recipe": "longkat"}, "domain_parallel.recipe: 'longkat' is not a recipe; allowed: "),
        ({"overrides": ["+preset=cpu_tiny", "+preset=gpu"]}, "domain_parallel.overrides: "),
        (
            {"expert_overrides": ["trainer.total_training_stepz=2"]},
            "domain_parallel.expert_overrides: the expert runs' config: trainer.total_training_stepz: "
            "not a key of verl's config or of the recipe; did you mean trainer.total_training_steps?",
        ),
        ({"general_overrides": ["trainer.total_training_steps"]}, "domain_parallel.general_overrides: "),
        (
            {
                "domains": {
                    "a": {"train_files": "a.parquet", "val_files": "nope.parquet"},
                    "b": {"train_files": "b.parquet", "val_files": "b.parquet"},
                }
            },
            "domain_parallel.domains.a.val_files: nope.parquet: no such file",
        ),
    ],  # fmt: skip
)
def test_domain_parallel_refuses_a_bad_recipe_or_override_before_any_stage(tmp_path, monkeypatch, capsys, change, said):
    monkeypatch.chdir(tmp_path)
    config = pipeline_yaml(tmp_path, **change)
    assert reasonrl_main(["domain-parallel", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"reasonrl domain-parallel: {config}: ") and said in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "outputs").exists(), "no Hydra output folder in the working directory"
    assert not (tmp_path / "runs").exists(), "no stage started"


def test_domain_parallel_yaml_errors_name_the_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "pipeline.yaml"
    config.write_text("recipe: longcat\nworkdir: runs\ndomains:\n  a: {train_files: a\n")
    assert reasonrl_main(["domain-parallel", "--config", str(config)]) == 2
    assert capsys.readouterr().err.startswith(f"reasonrl domain-parallel: {config}:")


def test_a_valid_pipeline_passes_the_checks_and_its_runs_keep_hydra_under_their_folder(tmp_path, monkeypatch):
    from reasonrl.plugins.merging.domain_parallel import check_runs, load_spec, train_overrides

    monkeypatch.chdir(tmp_path)
    spec = load_spec(pipeline_yaml(tmp_path, expert_overrides=["trainer.total_training_steps=2"]))
    check_runs(spec)  # composes and validates both runs' configs; writes nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.parquet", "b.parquet", "pipeline.yaml"]
    folder = tmp_path / "runs" / "experts" / "a"
    assert f"hydra.run.dir={folder / 'hydra'}" in train_overrides(spec, folder, spec.domains["a"], [])


CHILD = """
import sys
from pathlib import Path
import reasonrl.cli.train as train
from reasonrl.plugins.merging.domain_parallel import load_spec, train_overrides
train.run_training = lambda config: print("trained", config.trainer.default_local_dir)  # Hydra's part only
spec = load_spec(Path(sys.argv[1]))
folder = Path(spec.workdir) / "experts" / "a"
sys.exit(train.main(train_overrides(spec, folder, spec.domains["a"], spec.expert_overrides)))
"""


def test_a_stage_child_writes_hydras_folder_under_its_stage_not_outputs_in_the_cwd(tmp_path):
    """``reasonrl train`` as a stage starts it (its Hydra app, training stubbed): Hydra's run
    folder is ``<stage>/hydra``; nothing appears in the working directory."""
    import subprocess
    import sys

    config = pipeline_yaml(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(config)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and "trained" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    assert (tmp_path / "runs" / "experts" / "a" / "hydra" / ".hydra" / "config.yaml").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.parquet", "b.parquet", "pipeline.yaml", "runs"]


def test_each_expert_runs_with_its_domains_own_overrides_checked_by_name(tmp_path, monkeypatch, capsys):
    """LongCat §3.4: each domain's expert with its own settings (STEM 64K, agentic 48K, ...)."""
    from reasonrl.plugins.merging.domain_parallel import check_runs, expert_extra, load_spec

    monkeypatch.chdir(tmp_path)
    domains = {
        "a": {"train_files": "a.parquet", "val_files": "a.parquet", "overrides": ["data.max_response_length=64"]},
        "b": {"train_files": "b.parquet", "val_files": "b.parquet"},
    }
    spec = load_spec(pipeline_yaml(tmp_path, domains=domains, expert_overrides=["trainer.total_training_steps=2"]))
    check_runs(spec)
    assert expert_extra(spec, "a") == ["trainer.total_training_steps=2", "data.max_response_length=64"]
    assert expert_extra(spec, "b") == ["trainer.total_training_steps=2"]
    domains["a"]["overrides"] = ["data.max_response_lenght=64"]
    config = pipeline_yaml(tmp_path, domains=domains)
    assert reasonrl_main(["domain-parallel", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "domain_parallel.domains.a.overrides: the a expert run's config: data.max_response_lenght" in err, err
    domains["a"]["overrides"] = "data.max_response_length=64"
    with pytest.raises(ConfigError, match="a list of strings"):
        load_spec(pipeline_yaml(tmp_path, domains=domains))
