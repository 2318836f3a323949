"""The SFT recipes (``reasonrl sft recipe=<name>``): their values are the reports' (as
docs/report_values.yaml states them, each under a comment saying its basis), they pass verl's own
validation, and each one's CPU SFT run (the cpu_tiny preset: the smoke model on the smoke task,
two steps under torchrun on verl's FSDP2 engine) trains the model and leaves the Hugging Face
model the RL recipe starts from. That the RL recipe runs from it: the pipeline demo
(integration_tests/test_pipeline_demo.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from integration_tests.test_recipes import BASIS_WORD, CONFIGS, differences, report_values
from reasonrl.sft import compose_sft_config

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

SFT_RECIPES = ["mimo_sft", "nemotron_sft", "longcat_sft"]
#: the report's base model is no public checkpoint: the recipe asks for it (model.path: null)
NEEDS_MODEL = {"nemotron_sft", "longcat_sft"}
STEPS = 2


def composed(recipe: str, *overrides: str):
    extra = ["model.path=/checkpoints/base"] if recipe in NEEDS_MODEL and not overrides else []
    return compose_sft_config([f"recipe={recipe}", *extra, *overrides])


@pytest.mark.parametrize("recipe", SFT_RECIPES)
def test_sft_recipe_values_are_the_reports_with_their_basis(recipe):
    from reasonrl.testing.yaml_lines import leaf_comments

    entries = {entry["key"]: entry for entry in report_values()[recipe]}
    wrong = differences(composed(recipe), report_values()[recipe])
    assert not wrong, f"SFT recipe {recipe} differs from docs/report_values.yaml: {wrong}"
    own = leaf_comments(CONFIGS / "sft_recipe" / f"{recipe}.yaml")
    unlisted = sorted(key for key in own if not key.startswith("reasonrl.recipe.") and key not in entries)
    if recipe in NEEDS_MODEL:
        assert "model.path" in unlisted and composed(recipe, "+preset=cpu_tiny").model.path  # null: the user's
        unlisted.remove("model.path")
        assert "assumption" in own["model.path"]
    assert own and not unlisted, f"{recipe} sets {unlisted} with no entry in docs/report_values.yaml"
    unflagged = {
        key: own.get(key) for key, entry in entries.items() if BASIS_WORD[entry["basis"]] not in (own.get(key) or "")
    }
    assert not unflagged, (
        f"{recipe}: these values are not set by the recipe under a comment saying their basis: {unflagged}"
    )


@pytest.mark.parametrize("recipe", SFT_RECIPES)
@pytest.mark.parametrize("preset", [[], ["+preset=cpu_tiny"]], ids=["full", "cpu_tiny"])
def test_sft_recipe_passes_verls_validation(recipe, preset):
    from reasonrl.sft import check_verl_sections

    config = composed(recipe, *preset)
    check_verl_sections(config)  # verl's SFT config dataclasses (engine, optim, checkpoint, profiler)
    assert config.reasonrl.recipe.rl_recipe in ("mimo", "nemotron", "longcat")
    if preset:
        assert config.data.max_length == 64 and config.trainer.device == "cpu"  # the preset wins
        assert config.optim.lr_scheduler_type == composed(recipe).optim.lr_scheduler_type  # the recipe's stays


def test_a_bad_sft_config_is_named_before_anything_starts(tmp_path):
    from reasonrl.errors import UserError
    from reasonrl.sft import check_sft_config

    def refused(*overrides):
        with pytest.raises(UserError) as error:
            check_sft_config(compose_sft_config(list(overrides)))
        return str(error.value)

    assert refused("recipe=nemotron_sft").startswith("model.path:")
    assert refused("recipe=mimo_sft", "checkpoint.save_contents=[model]").startswith("checkpoint.save_contents:")
    assert refused("recipe=mimo_sft", "optim.lr_scheduler_type=weird").startswith("optim: verl refuses it")
    missing = refused("recipe=mimo_sft", "+preset=cpu_tiny", f"data.train_files={tmp_path}/none.parquet")
    assert missing.startswith("data.train_files:") and "none.parquet" in missing
    # the command: one line, exit 2, nothing written
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "reasonrl.cli.main",
            "sft",
            "recipe=mimo_sfx",
            f"trainer.default_local_dir={tmp_path}/x",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and "Could not find 'recipe/mimo_sfx'" in done.stderr, done.stderr[-2000:]
    assert not any(tmp_path.iterdir())


def run_cpu_sft(recipe: str, out: Path) -> subprocess.CompletedProcess:
    command = [
        str(Path(sys.executable).parent / "reasonrl"),
        "sft",
        f"recipe={recipe}",
        "+preset=cpu_tiny",
        f"trainer.default_local_dir={out}",
        f"trainer.total_training_steps={STEPS}",
        f"trainer.save_freq={STEPS}",
        f"trainer.test_freq={STEPS}",
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=800, env={**os.environ})


@pytest.fixture(scope="module")
def cpu_runs(tmp_path_factory):
    """Each recipe's CPU SFT run, side by side (most of each is torch's and verl's start-up)."""
    from reasonrl.smoke.prepare import prepare

    prepare()
    root = tmp_path_factory.mktemp("sft_runs")
    with ThreadPoolExecutor(max_workers=len(SFT_RECIPES)) as pool:
        runs = dict(zip(SFT_RECIPES, pool.map(lambda r: run_cpu_sft(r, root / r), SFT_RECIPES)))
    return root, runs


@pytest.mark.parametrize("recipe", SFT_RECIPES)
def test_cpu_sft_run_trains_and_leaves_the_model_the_rl_recipe_starts_from(recipe, cpu_runs):
    from safetensors.torch import load_file

    from reasonrl.smoke.prepare import prepare

    root, runs = cpu_runs
    done = runs[recipe]
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    assert f"step:{STEPS} - val/loss" in log  # verl's validation loss on the held-out SFT rows
    record = json.loads((root / recipe / "sft_output.json").read_text())
    model = Path(record["hf_model"])
    assert model == (root / recipe / f"global_step_{STEPS}" / "huggingface").resolve()
    assert record["rl_recipe"] == composed(recipe, "+preset=cpu_tiny").reasonrl.recipe.rl_recipe
    assert f"reasonrl train recipe={record['rl_recipe']} actor_rollout_ref.model.path={model}" in log
    before = load_file(prepare() / "model" / "model.safetensors")
    after = load_file(next(model.glob("*.safetensors")))
    assert set(after) >= {k for k in before if not k.startswith("lm_head")}  # the whole model, tied head aside
    changed = [name for name in before if name in after and not torch.equal(before[name], after[name])]
    assert len(changed) > len(before) // 2, "the SFT steps changed the weights"
    assert (model / "tokenizer_config.json").exists()  # what the RL recipe's rollout loads beside it
