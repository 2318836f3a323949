"""Start-up checks of ``reasonrl train``: bad verl values, keys and dataset files are named
before any work starts (issue 42, points 3–5)."""

from __future__ import annotations

import subprocess
import sys
import time

import pandas as pd
import pytest

from reasonrl.cli import main as cli
from reasonrl.cli.train import compose_config, precheck
from reasonrl.config import ConfigError
from reasonrl.contracts import DatasetColumn
from reasonrl.errors import UserError
from reasonrl.startup_checks import check_config, check_dataset_columns, check_model_path, check_overrides

TINY = ["recipe=mimo", "+preset=cpu_tiny"]


@pytest.mark.parametrize(
    "overrides, key, words",
    [
        (["recipe=kimi_k15_long2short"], "actor_rollout_ref.model.path", "is required by recipe kimi_k15_long2short"),
        ([*TINY, "actor_rollout_ref.rollout.n=0"], "actor_rollout_ref.rollout.n", "int >= 1"),
        ([*TINY, "actor_rollout_ref.rollout.n=1"], "actor_rollout_ref.rollout.n", "adv_estimator=grpo"),
        ([*TINY, "data.train_batch_size=abc"], "data.train_batch_size", "expected an int, got 'abc'"),
        ([*TINY, "+data.train_batch_sise=8"], "data.train_batch_sise", "did you mean data.train_batch_size?"),
        ([*TINY, "data.train_batch_sise=8"], "data.train_batch_sise", "did you mean data.train_batch_size?"),
        ([*TINY, "++actor_rollout_ref.rollout.nn=3"], "actor_rollout_ref.rollout.nn", "did you mean"),
        ([*TINY, "algorithm.filter_groups.enable=maybe"], "algorithm.filter_groups.enable", "expected a bool"),
        ([*TINY, "reasonrl.sampling.alpah=0.1"], "reasonrl.sampling.alpah", "did you mean reasonrl.sampling.alpha?"),
        ([*TINY, "reasonrl.rollout.token_budget=5"], "reasonrl.rollout.token_budget", "+reasonrl/rollout=<option>"),
        ([*TINY, "reasonrl.samplin.alpha=1"], "reasonrl.samplin", "no installed plugin declares"),
        (
            ["recipe=longcat", "reasonrl.sampling.pace_steps=3"],
            "reasonrl.sampling.pace_steps",
            "leave unset: add it with +reasonrl.sampling.pace_steps=<value>",
        ),
        (
            # two data-parallel ranks share 8 prompts × 4 responses: 16 each, not a multiple of 32
            [*TINY, "trainer.n_gpus_per_node=2"],
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
            "each of the 2 data-parallel ranks gets 16 responses per update",
        ),
        (
            [*TINY, "+ray_kwargs.ray_init.adress=10.0.0.1:6379"],
            "ray_kwargs.ray_init.adress",
            "not an argument of ray.init (verl passes ray_kwargs.ray_init to it); did you mean ray_kwargs.ray_init.address?",
        ),
    ],
)
def test_bad_verl_values_are_named_before_anything_runs(overrides, key, words):
    with pytest.raises(UserError) as refused:
        precheck(overrides)
    assert refused.value.subject == key
    assert words in refused.value.message


def test_open_verl_sections_and_real_keys_pass():
    precheck([*TINY, "+actor_rollout_ref.model.override_config.rope_theta=10000", "data.train_batch_size=8"])
    precheck(["recipe=kimi_k15_long2short", "actor_rollout_ref.model.path=/ckpt/long_cot"])
    # Ray workers' environment variables are names of the user's choosing, even where the preset
    # already sets some (the MTP main-job test adds vLLM's logging variables this way)
    precheck([*TINY, "+ray_kwargs.ray_init.runtime_env.env_vars.VLLM_LOG_STATS_INTERVAL=1"])
    # verl hands ray_kwargs.ray_init to ray.init: joining a running cluster (integration_tests/test_ray_nodes.py)
    precheck([*TINY, "+ray_kwargs.ray_init.address=10.0.0.1:6379", "ray_kwargs.ray_init.num_cpus=null"])
    # tensor parallelism leaves one data-parallel rank: its share (32) takes micro-batches of 32
    precheck(
        [
            "recipe=longcat",
            "+preset=cpu_tiny_megatron",
            "trainer.n_gpus_per_node=2",
            "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
        ]
    )


@pytest.mark.parametrize("recipe", ["mimo", "kimi_k15", "longcat", "nemotron"])
def test_every_recipe_passes_the_checks(recipe):
    check_config(compose_config([f"recipe={recipe}"]))
    check_overrides([f"recipe={recipe}", "+preset=cpu_tiny", "trainer.total_training_steps=3"], compose_config)


def test_a_recipe_without_required_keys_is_not_refused():
    config = compose_config(TINY)
    assert config.reasonrl.recipe.get("required") is None
    check_config(config)


def test_cli_prints_one_line_and_exits_2(capsys):
    code = cli.main(["train", *TINY, "actor_rollout_ref.rollout.n=0", "--cfg", "job"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("reasonrl train: actor_rollout_ref.rollout.n: ")
    assert "Traceback" not in err


def _parquet(path, drop=(), extra_drop=()):
    rows = [
        {
            "data_source": "toy",
            "prompt": [{"role": "user", "content": "1+1="}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": "2"},
            "extra_info": {k: v for k, v in {"index": 0, "pass_rate": 0.5}.items() if k not in extra_drop},
        }
    ]
    pd.DataFrame(rows).drop(columns=list(drop)).to_parquet(path)
    return str(path)


def _files_config(train, val=None, **extra):
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {"data": {"train_files": train, "val_files": val or train, "prompt_key": "prompt"}, **extra}
    )


def test_a_parquet_without_a_column_verl_reads_is_named(tmp_path):
    good = _parquet(tmp_path / "good.parquet")
    check_dataset_columns(_files_config(good), [])
    bad = _parquet(tmp_path / "bad.parquet", drop=["reward_model"])
    with pytest.raises(UserError) as refused:
        check_dataset_columns(_files_config(good, bad), [])
    assert refused.value.subject == bad
    assert "'reward_model'" in refused.value.message and "ground_truth" in refused.value.message


def test_a_plugin_column_may_live_in_extra_info_and_is_named_with_its_option(tmp_path):
    column = DatasetColumn("pass_rate", "reasonrl.sampling.pass_rate_column", or_extra_info=True, train_only=True)
    check_dataset_columns(_files_config(_parquet(tmp_path / "in_extra.parquet")), [column])
    bad = _parquet(tmp_path / "no_rate.parquet", extra_drop=["pass_rate"])
    with pytest.raises(UserError) as refused:
        check_dataset_columns(_files_config(bad), [column])
    assert "'pass_rate' (nor a key of extra_info)" in refused.value.message
    assert "reasonrl.sampling.pass_rate_column" in refused.value.message
    # train-only: the validation file need not carry it
    check_dataset_columns(_files_config(_parquet(tmp_path / "t.parquet"), bad), [column])


def test_missing_or_unreadable_files_are_named(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        check_dataset_columns(_files_config(str(tmp_path / "none.parquet")), [])
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"not parquet")
    with pytest.raises(UserError, match="not a readable parquet file"):
        check_dataset_columns(_files_config(str(junk)), [])


def test_the_samplers_declare_their_columns():
    from reasonrl.startup_checks import plugin_dataset_columns

    nemotron = plugin_dataset_columns(compose_config(["recipe=nemotron"]))
    assert [c.name for c in nemotron] == ["pass_rate"] and nemotron[0].or_extra_info
    assert plugin_dataset_columns(compose_config(["recipe=longcat"])) == []


def test_model_path(tmp_path):
    from omegaconf import OmegaConf

    def config(path):
        return OmegaConf.create({"actor_rollout_ref": {"model": {"path": path}}})

    with pytest.raises(UserError, match="no such folder"):
        check_model_path(config(str(tmp_path / "none")))
    with pytest.raises(UserError, match="no config.json"):
        check_model_path(config(str(tmp_path)))
    with pytest.raises(ConfigError, match="is not set"):
        check_model_path(config(None))
    (tmp_path / "config.json").write_text("{}")
    check_model_path(config(str(tmp_path)))
    check_model_path(config("Qwen/Qwen2.5-0.5B"))  # a Hub id: the loader's to find


def test_a_dataset_without_a_column_fails_before_ray_starts(tmp_path):
    """Through ``reasonrl train`` as a user runs it (Hydra's app, the driver's path up to verl's
    entry point): refused in seconds, naming file and column (it used to run 123 s, then fail
    elsewhere)."""
    bad = _parquet(tmp_path / "no_rm.parquet", drop=["reward_model"])
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    start = time.monotonic()
    result = subprocess.run(
        [
            *[sys.executable, "-m", "reasonrl.cli.main", "train", "recipe=mimo"],
            *[f"data.train_files={bad}", f"data.val_files={bad}", f"actor_rollout_ref.model.path={model}"],
            f"trainer.default_local_dir={tmp_path / 'run'}",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"reasonrl train: {bad}: no column 'reward_model'" in result.stderr
    assert "Traceback" not in result.stderr and "ray init" not in result.stdout
    print(f"refused after {time.monotonic() - start:.1f} s")


def test_an_unwritable_run_folder_is_refused_before_hydra_makes_its_folder_there(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    code = cli.main(["train", *TINY, f"trainer.default_local_dir={blocker}/run"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"reasonrl train: trainer.default_local_dir: {blocker}/run cannot be written")
    assert "Traceback" not in err
