"""model_rewards: rewards decided by models (LongCat §3.3 / §3.4.3, Llama-Nemotron §5.1 / §6, Kimi k1.5 §2.3.5).

- verdict rewards (``verdict_reward.py``): a judge model decides whether a final answer matches
  the reference — LongCat's generative RM, Nemotron's LLM judge, Kimi's chain-of-thought RM, one
  mechanism with the reports' templates (``templates.yaml``); Math-Verify first, the answer
  fenced as data, verdicts parsed without crashing, a cache of repeated answers, counters;
- a discriminative reward model's score (``score_reward.py``; LongCat §3.4.3's general RL), asked
  of verl's reward-model server as verl itself asks it;
- the instruction-following reward (``constraints.py``, IFEval's checks; Nemotron §6.1);
- RPO, reward-aware preference optimization (``rpo.py``; Nemotron §6.2).

Framework-free cores; the judge is any ``ask(messages) -> text`` (``judge_client.openai_chat`` on
verl's reward-model router).
"""

from __future__ import annotations

from reasonrl.contracts import CliCommand, ConfigGroup, DatasetColumn, PluginInfo, TrainerCallback
from reasonrl.hookspecs import hookimpl


@hookimpl
def reasonrl_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="model_rewards",
        summary="verdict rewards from a judge model (GenRM, LLM judge, CoT RM) with fenced answers and a cache; "
        "a discriminative reward model's score; IFEval constraint reward; RPO loss",
        reports=("LongCat-Flash-Thinking §3.3, §3.4.3", "Llama-Nemotron §5.1, §6", "Kimi k1.5 §2.3.5"),
        requires=("rewards",),  # Math-Verify first (reasonrl.api.math_reward), the judge only where it says "not equal"
    )


@hookimpl
def reasonrl_config_groups() -> list[ConfigGroup]:
    from reasonrl.plugins.model_rewards.config import MODEL_REWARDS_GROUP

    return [MODEL_REWARDS_GROUP]


@hookimpl
def reasonrl_check_config(config) -> None:
    from reasonrl.plugins.model_rewards.config import check_run

    check_run(config)


@hookimpl
def reasonrl_dataset_columns(config) -> list[DatasetColumn]:
    """Rows scored by a model show it their question: checked in the data files before Ray starts."""
    from reasonrl.plugins.model_rewards.config import asks_a_model

    if not asks_a_model(config):
        return []
    needed_by = "reasonrl.model_rewards (the judge / reward model is shown each scored row's extra_info.question)"
    return [DatasetColumn("question", needed_by, or_extra_info=True)]


def _build_counters(config):
    from reasonrl.plugins.model_rewards.verl_callback import build

    return build(config)


@hookimpl
def reasonrl_trainer_callbacks() -> list[TrainerCallback]:
    return [TrainerCallback("model_rewards", _build_counters)]


@hookimpl
def reasonrl_cli_commands() -> list[CliCommand]:
    from reasonrl.plugins.model_rewards.rpo_cli import RPO_COMMAND

    return [RPO_COMMAND]


@hookimpl
def reasonrl_benchmarks() -> list[CliCommand]:
    # benchmarks/model_rewards/ of a source checkout (verdicts per second from the CPU judge)
    from reasonrl.source_checkout import checkout_benchmarks

    return checkout_benchmarks("model_rewards")
