"""The ``vllm-cpu-updatable-weights`` patch: vLLM's CPU build takes in-place weight updates.

vLLM 0.32's CPU linear layers repack their weights after loading and drop the parameter's
``weight_loader``; verl's weight sync (``model.load_weights``) then fails. These tests run
vLLM's real CPU build in fresh processes (about 15 s each).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from reasonrl.testing.fresh_process import run_fresh

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "fixtures" / "vllm_weight_sync.py"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from reasonrl.smoke.arithmetic import make_problems
    from reasonrl.smoke.model import TinyModelSpec, build_tiny_model

    folder = tmp_path_factory.mktemp("tiny_model")
    build_tiny_model(
        folder,
        dataclasses.replace(TinyModelSpec(), warmup_steps=40, warmup_target_accuracy=0),
        make_problems(8, seed=0),
    )
    return folder


def run_sync(model: Path, **env: str):
    import sys

    return run_fresh([sys.executable, str(SCRIPT), str(model)], env={"VERL_PLATFORM": "cpu", **env}, timeout=300)


def test_every_sync_reaches_vllm_generation(tiny_model):
    result = run_sync(tiny_model)
    assert result.returncode == 0, result.stderr[-3000:]
    counts = json.loads(result.stdout.strip().splitlines()[-1])
    prompts = counts["prompts"]
    assert counts["random_weights"] < prompts // 2, "vLLM starts from random weights (load_format=dummy)"
    assert counts["first_sync"] == prompts, "after the first sync vLLM's greedy answers are the trainer's"
    assert counts["hf_changed"] > prompts // 2, "the second update changes the policy's answers"
    assert counts["second_sync"] == prompts, "and vLLM follows the second sync too"


def test_without_the_patch_vllm_cpu_cannot_take_the_update(tiny_model):
    """Why the patch exists; when this starts passing the sync, upstream has fixed it."""
    result = run_sync(tiny_model, REASONRL_DISABLE_PATCHES="vllm-cpu-updatable-weights")
    assert result.returncode != 0
    assert "has no attribute 'weight_loader'" in result.stderr
