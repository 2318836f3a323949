"""Recipes compose on top of verl's real trainer config and pass verl's own validation."""

from __future__ import annotations

import pytest
import yaml

from reasonrl.testing.fresh_process import reasonrl_fresh

pytestmark = pytest.mark.integration

RECIPES = ["mimo", "kimi_k15", "longcat", "nemotron"]
#: longcat: GRPO without its masked responses (incomplete-signal masking, plugins/rewards)
ADV_ESTIMATOR = {"mimo": "grpo", "kimi_k15": "grpo", "longcat": "masked_grpo", "nemotron": "grpo"}


@pytest.mark.parametrize("recipe", RECIPES)
def test_cfg_job_prints_merged_verl_config(recipe):
    result = reasonrl_fresh(["train", f"recipe={recipe}", "--cfg", "job"])
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(result.stdout)
    assert config["reasonrl"]["recipe"]["name"] == recipe
    # verl's own keys are there, set by the recipe.
    assert config["algorithm"]["adv_estimator"] == ADV_ESTIMATOR[recipe]
    assert config["reward"]["reward_manager"]["name"] == "reasonrl"
    assert config["actor_rollout_ref"]["rollout"]["name"] == "vllm"
    assert "ppo_mini_batch_size" in config["actor_rollout_ref"]["actor"]


def test_recipe_values_follow_the_reports():
    from reasonrl.cli.train import compose_config

    mimo = compose_config(["recipe=mimo"])
    assert (mimo.data.train_batch_size, mimo.actor_rollout_ref.actor.ppo_mini_batch_size) == (512, 32)
    assert mimo.actor_rollout_ref.actor.optim.lr == 1e-6 and mimo.data.max_response_length == 32768
    assert not mimo.actor_rollout_ref.actor.use_kl_loss and not mimo.algorithm.use_kl_in_reward
    nemotron = compose_config(["recipe=nemotron"])
    group = nemotron.actor_rollout_ref.rollout.n
    assert (nemotron.data.train_batch_size, group) == (72, 16)
    global_batch = nemotron.actor_rollout_ref.actor.ppo_mini_batch_size * group
    assert global_batch == 576
    assert nemotron.data.train_batch_size * group / global_batch == 2  # updates per rollout
    longcat = compose_config(["recipe=longcat"])
    actor = longcat.actor_rollout_ref.actor
    assert actor.loss_agg_mode == "seq-mean-token-sum-norm" and actor.loss_scale_factor == 65536
    assert actor.clip_ratio_c == 3.0 and longcat.algorithm.rollout_correction.rollout_is == "token"


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("preset", [[], ["+preset=cpu_tiny"]], ids=["full", "cpu_tiny"])
def test_composed_config_passes_verls_validation(recipe, preset):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from reasonrl.api import validate_config as validate_reasonrl
    from reasonrl.cli.train import compose_config

    config = compose_config([f"recipe={recipe}", *preset])
    validate_reasonrl(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))


def test_cpu_tiny_preset_overrides_the_recipe():
    from reasonrl.cli.train import compose_config

    config = compose_config(["recipe=mimo", "+preset=cpu_tiny"])
    assert config.data.train_batch_size == 16 and config.reasonrl.preset.name == "cpu_tiny"
    assert config.actor_rollout_ref.actor.optim.lr == 1e-4, "the recipe's 7B learning rate is replaced"
    assert config.ray_kwargs.ray_init.runtime_env.env_vars.VERL_PLATFORM == "cpu"
    # The recipe's own choices that the preset does not touch survive.
    assert config.actor_rollout_ref.actor.clip_ratio_high == 0.28


def test_misspelt_reasonrl_group_fails_naming_it():
    result = reasonrl_fresh(["train", "recipe=mimo", "+reasonrl.cpu_platfrom.x=1", "--cfg", "job"])
    assert result.returncode == 2
    assert "reasonrl.cpu_platfrom" in result.stderr
    assert result.stdout == "", "nothing may be printed or run before validation"


def test_misspelt_verl_key_fails_naming_it():
    result = reasonrl_fresh(["train", "recipe=mimo", "data.train_batch_sise=3", "--cfg", "job"])
    assert result.returncode == 2 and "data.train_batch_sise" in result.stderr


def test_missing_or_unknown_recipe_lists_the_recipes():
    missing = reasonrl_fresh(["train", "--cfg", "job"])
    unknown = reasonrl_fresh(["train", "recipe=mimoo", "--cfg", "job"])
    for result in (missing, unknown):
        assert result.returncode == 2
        assert all(name in result.stderr for name in RECIPES)


def test_train_help_lists_recipes_and_presets():
    result = reasonrl_fresh(["train", "--help"])
    assert result.returncode == 0, result.stderr
    assert "recipe: kimi_k15, longcat, mimo, nemotron" in result.stdout and "preset: cpu_tiny" in result.stdout


def test_train_help_with_a_recipe_is_hydras_with_reasonrl_header():
    result = reasonrl_fresh(["train", "recipe=mimo", "--help"])
    assert result.returncode == 0, result.stderr
    assert (
        "reasonrl train: run verl's PPO/GRPO trainer" in result.stdout
        and "recipe: kimi_k15, longcat, mimo, nemotron" in result.stdout
    )
