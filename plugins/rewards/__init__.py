"""rewards: the reports' rewards for verl (MiMo §3.2–3.3.1, Kimi k1.5 §2.3.3, LongCat §3.2.2, Llama-Nemotron §4).

- the code judge (``judge/``): bubblewrap-isolated warm runners, per-test verdicts, Python
  and C++, async batch API, ``reasonrl judge`` CLI, SandboxFusion backend;
- MiMo §3.3.1 test-difficulty-driven code reward (``difficulty.py``; ``reasonrl difficulty
  calibrate``), Math-Verify math reward, Llama-Nemotron thinking-toggle format reward and
  prompt transform, Kimi k1.5 length penalty, LongCat incomplete-signal masking;
- verl: reward manager ``reasonrl`` (reward loop), a ``before_advantage`` callback of trainer
  mode ``reasonrl_sync`` (length penalty + masking over each prompt's group), advantage
  estimator ``masked_grpo``.

Framework-free cores in the top-level modules; verl adapters in ``verl_*.py``.
"""

from __future__ import annotations

from reasonrl.config import ConfigError, require_trainer_mode
from reasonrl.contracts import CliCommand, ConfigGroup, PluginInfo, Registration, TrainerCallback
from reasonrl.hookspecs import hookimpl
from reasonrl.plugins.rewards.config import REWARDS_GROUP

REWARD_MANAGER_PACKAGE = "verl.experimental.reward_loop.reward_manager"


def _register_reward_manager() -> None:
    from reasonrl.bridges.import_hooks import register_adapter_when_loaded

    # verl's reward-manager registry is not loaded by `import verl`: register where it is.
    register_adapter_when_loaded(
        REWARD_MANAGER_PACKAGE, "reasonrl.plugins.rewards.verl_reward_manager", "register_manager"
    )


def _register_estimator() -> None:
    from reasonrl.bridges.import_hooks import run_after_import

    # when verl's estimator registry is imported (the trainer), not in every process importing verl
    run_after_import("verl.trainer.ppo.core_algos", _register_estimator_now)


def _register_estimator_now() -> None:
    from reasonrl.plugins.rewards.verl_group import register_estimator

    register_estimator()


def _build_group_step(config):
    from reasonrl.plugins.rewards.verl_group import build

    return build(config)


@hookimpl
def reasonrl_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="rewards",
        summary="sandboxed code judge, test-difficulty code reward, Math-Verify, thinking toggle, Kimi length penalty, incomplete-signal masking",
        reports=("MiMo §3.3.1", "Llama-Nemotron §4", "Kimi k1.5 §2.3.3", "LongCat-Flash-Thinking §3.2"),
    )


@hookimpl
def reasonrl_verl_registrations() -> list[Registration]:
    return [
        Registration(
            "verl",
            "reward_manager",
            "reasonrl",
            _register_reward_manager,
            "reward_loop.reward_manager.REWARD_MANAGER['reasonrl']",
        ),
        Registration(
            "verl",
            "adv_estimator",
            "masked_grpo",
            _register_estimator,
            "core_algos.ADV_ESTIMATOR_REGISTRY['masked_grpo']",
        ),
    ]


@hookimpl
def reasonrl_trainer_callbacks() -> list[TrainerCallback]:
    return [TrainerCallback("group_rewards", _build_group_step)]


@hookimpl
def reasonrl_config_groups() -> list[ConfigGroup]:
    return [REWARDS_GROUP]


@hookimpl
def reasonrl_check_config(config) -> None:
    from omegaconf import OmegaConf

    section = OmegaConf.select(config, "reasonrl.rewards", default=None)
    if section is None:
        return
    from reasonrl.plugins.rewards.config import settings_from

    settings = settings_from(config)
    manager = OmegaConf.select(config, "reward.reward_manager.name", default=None)
    if manager != "reasonrl":
        raise ConfigError(
            "reward.reward_manager.name",
            f"is {manager!r} but reasonrl.rewards is set: use +reasonrl/rewards=<option> (it selects 'reasonrl')",
        )
    if settings.needs_group_callback:
        require_trainer_mode(config, "the length penalty and incomplete-signal masking (its before_advantage step)")
    estimator = OmegaConf.select(config, "algorithm.adv_estimator", default=None)
    if settings.mask_incomplete and estimator != "masked_grpo":
        raise ConfigError(
            "algorithm.adv_estimator",
            f"is {estimator!r}: with reasonrl.rewards.mask_incomplete use 'masked_grpo' (GRPO without the masked responses)",
        )


@hookimpl
def reasonrl_prepare_rows(rows: list[dict]) -> None:
    from reasonrl.plugins.rewards.difficulty import calibrate_rows

    calibrate_rows(rows)


@hookimpl
def reasonrl_check_inputs(config) -> None:
    """A run whose data holds code problems for the local judge probes the judge's sandbox in the
    driver: a sandbox that cannot start here stops the run before Ray starts, not at step 1."""
    from omegaconf import OmegaConf

    if OmegaConf.select(config, "reasonrl.rewards", default=None) is None:
        return
    from reasonrl.plugins.rewards.config import settings_from
    from reasonrl.plugins.rewards.startup import probe_judge_for_code_data

    probe_judge_for_code_data(config, settings_from(config))


@hookimpl
def reasonrl_cli_commands() -> list[CliCommand]:
    from reasonrl.plugins.rewards.cli import DIFFICULTY_COMMAND, JUDGE_COMMAND

    return [JUDGE_COMMAND, DIFFICULTY_COMMAND]


@hookimpl
def reasonrl_benchmarks() -> list[CliCommand]:
    # benchmarks/rewards/ of a source checkout; the installed package holds no benchmarks
    from reasonrl.source_checkout import checkout_benchmarks

    return checkout_benchmarks("rewards")


@hookimpl
def reasonrl_api_functions():
    from reasonrl.plugins.rewards.facades import FUNCTIONS

    return dict(FUNCTIONS)
