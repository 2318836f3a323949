"""Recipes compose on top of verl's real trainer config and pass verl's own validation."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from reasonrl.testing.fresh_process import reasonrl_fresh

pytestmark = pytest.mark.integration

RECIPES = ["mimo", "kimi_k15", "kimi_k15_long2short", "longcat", "nemotron", "nemotron_if"]
#: required on the command line (kimi_k15_long2short: the long-CoT checkpoint it starts from)
RECIPE_ARGS = {"kimi_k15_long2short": ["actor_rollout_ref.model.path=/checkpoints/long_cot"]}
#: longcat: GRPO without its masked responses (incomplete-signal masking, plugins/rewards)
ADV_ESTIMATOR = {
    "mimo": "grpo",
    "kimi_k15": "grpo",
    "kimi_k15_long2short": "grpo",
    "longcat": "masked_grpo",
    "nemotron": "grpo",
    "nemotron_if": "rloo",
}


@pytest.fixture(scope="module")
def cfg_jobs():
    """``reasonrl train recipe=<r> --cfg job`` of every recipe, the fresh processes run side by side
    (each spends most of its ~15 s importing verl; CI time)."""
    from concurrent.futures import ThreadPoolExecutor

    def cfg_job(recipe):
        return reasonrl_fresh(["train", f"recipe={recipe}", *RECIPE_ARGS.get(recipe, []), "--cfg", "job"])

    with ThreadPoolExecutor(max_workers=len(RECIPES)) as pool:
        return dict(zip(RECIPES, pool.map(cfg_job, RECIPES)))


@pytest.mark.parametrize("recipe", RECIPES)
def test_cfg_job_prints_merged_verl_config(recipe, cfg_jobs):
    result = cfg_jobs[recipe]
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(result.stdout)
    assert config["reasonrl"]["recipe"]["name"] == recipe
    # verl's own keys are there, set by the recipe.
    assert config["algorithm"]["adv_estimator"] == ADV_ESTIMATOR[recipe]
    assert config["reward"]["reward_manager"]["name"] == "reasonrl"
    assert config["actor_rollout_ref"]["rollout"]["name"] == "vllm"
    assert "ppo_mini_batch_size" in config["actor_rollout_ref"]["actor"]


REPORT_VALUES = Path(__file__).resolve().parents[1] / "docs" / "report_values.yaml"
CONFIGS = Path(__file__).resolve().parents[1] / "hydra_configs"
#: what a value's governing YAML comment must say for each basis
BASIS_WORD = {"report": "§", "reading": "reading", "assumption": "assumption"}


def report_values() -> dict[str, list[dict]]:
    return yaml.safe_load(REPORT_VALUES.read_text())


def recipe_files(recipe: str) -> list[Path]:
    """The recipe file and the option files its defaults list select (``optional /reasonrl/<group>: <option>``),
    and those of a recipe it extends (a bare name: kimi_k15_long2short extends kimi_k15), that one first."""
    path = CONFIGS / "recipe" / f"{recipe}.yaml"
    files, parents = [path], []
    for entry in yaml.safe_load(path.read_text()).get("defaults", []):
        if isinstance(entry, dict):
            ((group, option),) = entry.items()
            files.append(CONFIGS / group.removeprefix("optional ").strip("/") / f"{option}.yaml")
        elif entry != "_self_":
            parents += recipe_files(entry)
    files += parents
    return files


@pytest.fixture(scope="module")
def composed():
    from reasonrl.cli.train import compose_config, resolve_in_driver

    configs = {}
    for recipe in RECIPES:
        configs[recipe] = compose_config([f"recipe={recipe}", *RECIPE_ARGS.get(recipe, [])])
        resolve_in_driver(configs[recipe])
    return configs


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_values_are_the_reports_values(recipe, composed):
    """Each entry of docs/report_values.yaml (value, section, basis) against the composed recipe."""
    wrong = differences(composed[recipe], report_values()[recipe])
    assert not wrong, f"recipe {recipe} differs from docs/report_values.yaml (recipe, table, source): {wrong}"


def differences(config, entries: list[dict]) -> dict[str, tuple]:
    """``key -> (config's value, table's value, source)`` where the composed config differs from
    the table's entries (each entry's basis and source checked on the way)."""
    from omegaconf import OmegaConf

    from reasonrl.config import config_value

    keys = [entry["key"] for entry in entries]
    assert len(keys) == len(set(keys)), "a key listed twice"
    wrong = {}
    for entry in entries:
        assert entry["basis"] in BASIS_WORD and entry["source"], entry
        if entry["basis"] != "assumption":
            assert "§" in entry["source"] or "Table" in entry["source"] or "App." in entry["source"], entry
        value = config_value(config, entry["key"])
        value = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
        same = value == pytest.approx(entry["value"]) if isinstance(entry["value"], float) else value == entry["value"]
        if not same:
            wrong[entry["key"]] = (value, entry["value"], entry["source"])
    return wrong


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_recipe_value_has_a_reference_and_says_its_basis(recipe):
    """Every key the recipe file sets is in the table; every value of the table is set by the
    recipe or its option files (none silently inherited from verl), under a comment that says
    its basis: a report section, "reading", or "assumption"."""
    from reasonrl.testing.yaml_lines import leaf_comments

    entries = {entry["key"]: entry for entry in report_values()[recipe]}
    own = leaf_comments(CONFIGS / "recipe" / f"{recipe}.yaml")
    unlisted = sorted(key for key in own if not key.startswith("reasonrl.recipe.") and key not in entries)
    assert not unlisted, f"recipe {recipe} sets {unlisted} with no entry in docs/report_values.yaml"
    comments: dict[str, str] = {}
    for path in reversed(recipe_files(recipe)):  # the recipe file wins over its option files
        comments = {**comments, **leaf_comments(path)}

    def governing(key: str) -> str | None:
        """The comment of the leaf that sets ``key`` (or a flow mapping holding it)."""
        parts = key.split(".")
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in comments:
                return comments[".".join(parts[:end])]
        return None

    unset = sorted(key for key in entries if governing(key) is None)
    assert not unset, f"recipe {recipe}: {unset} are not set by the recipe or its option files (verl defaults)"
    unflagged = {
        key: governing(key)
        for key, entry in entries.items()
        if BASIS_WORD[entry["basis"]] not in governing(key)
        and not (entry["basis"] == "assumption" and "not in the report" in governing(key))
    }
    assert not unflagged, f"recipe {recipe}: these comments do not say their basis: {unflagged}"


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("preset", [[], ["+preset=cpu_tiny"]], ids=["full", "cpu_tiny"])
def test_composed_config_passes_verls_validation(recipe, preset):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from reasonrl.api import validate_config as validate_reasonrl
    from reasonrl.cli.train import compose_config

    config = compose_config([f"recipe={recipe}", *preset, *([] if preset else RECIPE_ARGS.get(recipe, []))])
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


def test_train_help_lists_recipes_presets_and_the_override_forms():
    result = reasonrl_fresh(["train", "--help"])
    assert result.returncode == 0, result.stderr
    assert "recipe=             kimi_k15, kimi_k15_long2short, longcat, mimo, nemotron, nemotron_if" in result.stdout
    assert (
        "+preset=            cluster_kimi_k15, cluster_longcat, cluster_mimo, cluster_nemotron, cpu_tiny"
        in result.stdout
    )
    # each plugin option group in the `+reasonrl/<group>=<option>` form a user must type, with examples
    assert "+reasonrl/rollout=dora|fp8|partial|repeat_detection|seamless|staleness" in result.stdout
    assert "+reasonrl/sampling=kimi|longcat|mimo|nemotron" in result.stdout
    # the option example is the first installed group's first option (the core names none itself)
    assert "Examples:" in result.stdout and "+reasonrl/length_curriculum=longcat_code trainer" in result.stdout


def test_train_help_with_a_recipe_is_hydras_with_reasonrl_header():
    result = reasonrl_fresh(["train", "recipe=mimo", "--help"])
    assert result.returncode == 0, result.stderr
    assert (
        "reasonrl train: run verl's PPO/GRPO trainer" in result.stdout
        and "recipe: kimi_k15, kimi_k15_long2short, longcat, mimo, nemotron, nemotron_if" in result.stdout
    )


def test_longcat_groups_hold_more_than_one_response_and_carry_a_signal(composed):
    """At LongCat's real settings a prompt's group has G > 1 responses, so GRPO (the recipe's
    masked estimator, run by verl) centres a group's rewards on its mean: advantages sum to 0 and
    a group with one right answer carries a signal. A group of one (verl's default n = 1, what the
    recipe used to inherit) is no GRPO: verl gives it mean 0 and std 1, so its advantage is the raw
    reward (no baseline), and the online filter (verl's DAPO filter needs > 1 value) never drops it."""
    import verl  # noqa: F401
    from omegaconf import OmegaConf
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage

    from reasonrl.plugins.rewards.verl_group import register_estimator

    register_estimator()
    real = composed["longcat"]
    group = real.actor_rollout_ref.rollout.n
    assert group > 1

    def advantages(size: int) -> torch.Tensor:
        rewards = torch.zeros(size, 4)
        rewards[0, -1] = 1.0  # one right answer in the group
        data = DataProto.from_dict(
            tensors={"token_level_rewards": rewards, "response_mask": torch.ones(size, 4)},
            non_tensors={"uid": np.array(["p"] * size, dtype=object)},
        )
        config = OmegaConf.create({"norm_adv_by_std_in_grpo": True})
        return compute_advantage(
            data, adv_estimator=real.algorithm.adv_estimator, num_repeat=1, norm_adv_by_std_in_grpo=True, config=config
        ).batch["advantages"]

    grouped = advantages(group)[:, -1]
    assert grouped.abs().sum() > 0 and grouped.sum().abs() < 1e-4
    assert float(advantages(1)[0, -1]) == pytest.approx(1.0, abs=1e-4)  # one response: the raw reward, no baseline


@pytest.mark.parametrize("recipe", ["mimo", "nemotron"])
def test_dual_clip_is_off_where_the_report_has_none(recipe, composed):
    """verl's `vanilla` loss always floors A < 0 tokens at c·A; MiMo's and Nemotron's objectives
    have no such floor. verl clamps the log-ratio to ±20, so the recipes' c = 1e9 > e^20 never
    binds: verl's loss equals the plain clipped surrogate even at extreme ratios."""
    from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla
    from verl.utils.config import omega_conf_to_dataclass

    actor = omega_conf_to_dataclass(composed[recipe].actor_rollout_ref.actor)
    assert actor.clip_ratio_c > math.exp(20)
    generator = torch.Generator().manual_seed(0)
    old = torch.randn(64, 16, generator=generator)
    new = old + torch.randn(64, 16, generator=generator) * 8  # ratios far outside any clip range
    adv, mask = torch.randn(64, 16, generator=generator), torch.ones(64, 16)
    loss, metrics = compute_policy_loss_vanilla(old, new, adv, mask, loss_agg_mode="token-mean", config=actor)
    ratio = torch.exp(torch.clamp(new - old, -20, 20))
    clipped = torch.clamp(ratio, 1 - actor.clip_ratio_low, 1 + actor.clip_ratio_high)
    plain = torch.maximum(-adv * ratio, -adv * clipped).mean()
    assert metrics["actor/pg_clipfrac_lower"] == 0.0
    torch.testing.assert_close(loss, plain)
    actor = dataclasses.replace(actor, clip_ratio_c=3.0)  # verl's default: the floor binds on these ratios
    dual, dual_metrics = compute_policy_loss_vanilla(old, new, adv, mask, loss_agg_mode="token-mean", config=actor)
    assert dual_metrics["actor/pg_clipfrac_lower"] > 0 and not torch.allclose(dual, plain)


#: a cluster preset per recipe (hydra_configs/preset/cluster_<recipe>.yaml): the report's scale
CLUSTER_RECIPES = ["mimo", "kimi_k15", "longcat", "nemotron"]


@pytest.mark.parametrize("recipe", CLUSTER_RECIPES)
def test_cluster_preset_values_are_the_reports_values_and_pass_verls_validation(recipe):
    """Each preset value as docs/report_values.yaml (cluster_<recipe>) states it, over its recipe,
    and verl's own validation of the whole config (its batch sizes against the layout's devices)."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from reasonrl.api import validate_config as validate_reasonrl
    from reasonrl.cli.train import compose_config

    config = compose_config([f"recipe={recipe}", f"+preset=cluster_{recipe}"])
    assert config.reasonrl.preset.name == f"cluster_{recipe}" and config.reasonrl.recipe.name == recipe
    wrong = differences(config, report_values()[f"cluster_{recipe}"])
    assert not wrong, f"preset cluster_{recipe} differs from docs/report_values.yaml: {wrong}"
    validate_reasonrl(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))


@pytest.mark.parametrize("recipe", CLUSTER_RECIPES)
def test_every_cluster_preset_value_has_a_reference_and_says_its_basis(recipe):
    from reasonrl.testing.yaml_lines import leaf_comments

    entries = {entry["key"]: entry for entry in report_values()[f"cluster_{recipe}"]}
    own = leaf_comments(CONFIGS / "preset" / f"cluster_{recipe}.yaml")
    own = {key: comment for key, comment in own.items() if not key.startswith("reasonrl.preset.")}
    assert set(own) == set(entries), (sorted(set(own) - set(entries)), sorted(set(entries) - set(own)))
    unflagged = {key: own[key] for key, entry in entries.items() if BASIS_WORD[entry["basis"]] not in own[key]}
    assert not unflagged, f"preset cluster_{recipe}: these comments do not say their basis: {unflagged}"
