"""Knobs at ``reasonrl.model_rewards`` (LongCat §3.3, Llama-Nemotron §5.1 / §6.1, Kimi k1.5 §2.3.5),
validated before any work."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from reasonrl.config import ConfigError, group_settings, knob, require_trainer_mode
from reasonrl.contracts import ConfigGroup
from reasonrl.plugins.model_rewards.constraints import REWARD_KINDS


@dataclass
class ModelRewardsConfig:
    """``reasonrl.model_rewards``: verdict rewards from a judge model, and the constraint reward."""

    template: str = knob(
        "nemotron_judge",
        help="verdict prompt: a name in the template file (built in: longcat_genrm, nemotron_judge, kimi_cot_rm)",
    )
    template_file: Optional[str] = knob(None, help="YAML file of verdict templates (default: the built-in ones)")
    rule_first: bool = knob(True, help="Math-Verify first; the judge only where the rule says 'not equal'")
    unparsed_score: float = knob(
        0.0, help="score of a judge reply without a readable verdict (counted: unparsed)", low=0.0, high=1.0
    )
    timeout_score: float = knob(
        0.0, help="score when the judge is late or its server fails (counted: timeout / error)", low=0.0, high=1.0
    )
    timeout_s: float = knob(120.0, help="seconds one verdict may take", low=0.1)
    max_concurrency: int = knob(
        32, help="verdict requests in flight per reward worker (the engine batches them)", low=1
    )
    max_answer_chars: int = knob(
        2000, help="the judge sees at most this many characters of the final answer (from its end)", low=16
    )
    cache_size: int = knob(
        10_000,
        help="verdicts kept per reward worker for repeated answers; 0: off, every response asks (no sharing of concurrent repeats either)",
        low=0,
    )
    judge_domains: Optional[list] = knob(
        None, help="data_source values the judge scores (others: the reward manager's own rewards); unset: every row"
    )
    rm_domains: Optional[list] = knob(
        None,
        help="data_source values a discriminative reward model scores (its /classify score; LongCat §3.4.3's general RL); unset: none",
    )
    rm_activation: bool = knob(False, help="the reward model's score through its activation (sigmoid) instead of raw")
    judge_url: Optional[str] = knob(None, help="an OpenAI-compatible judge server; default: verl's reward-model router")
    judge_model: Optional[str] = knob(
        None, help="the served judge's model name; default: reward.reward_model.model_path"
    )
    judge_max_tokens: int = knob(1024, help="tokens the judge may write (reasoning + verdict)", low=1)
    judge_temperature: float = knob(0.0, help="judge sampling temperature", low=0.0)
    constraint_reward: str = knob(
        "binary_strict", help="instruction-following score (Nemotron §6.1)", choices=REWARD_KINDS
    )

    def check(self) -> None:
        from reasonrl.plugins.model_rewards.templates import TemplateError, load_templates

        try:
            templates = load_templates(self.template_file)
        except TemplateError as error:
            raise ConfigError("reasonrl.model_rewards.template_file", str(error)) from error
        if self.template not in templates:
            raise ConfigError(
                "reasonrl.model_rewards.template",
                f"{self.template!r} is not a template; known: {', '.join(sorted(templates))}",
            )


MODEL_REWARDS_GROUP = ConfigGroup(
    "model_rewards", ModelRewardsConfig, "verdict rewards from a judge model, instruction-following constraints"
)


def settings_from(config) -> ModelRewardsConfig:
    """The validated ``reasonrl.model_rewards`` section of a run config (defaults when absent)."""
    return group_settings(config, MODEL_REWARDS_GROUP)


#: verl's custom reward function of this plugin (``reward.custom_reward_function.path``; the option
#: files set it). Here, not beside the function: start-up checks read it without importing the scorer.
FUNCTION = "pkg://reasonrl.plugins.model_rewards.verl_reward_fn"


def uses_our_reward_function(config) -> bool:
    """Whether the run's verl custom reward function is this plugin's."""
    from omegaconf import OmegaConf

    return OmegaConf.select(config, "reward.custom_reward_function.path", default=None) == FUNCTION


def _scores_with_a_model(settings: ModelRewardsConfig) -> bool:
    return bool(settings.rm_domains) or settings.judge_domains is None or bool(settings.judge_domains)


def asks_a_model(config) -> bool:
    """Whether the run's reward function is this plugin's and scores some rows with a model."""
    return uses_our_reward_function(config) and _scores_with_a_model(settings_from(config))


def check_run(config) -> None:
    """At start-up, before any work: a run whose reward function is this plugin's runs in one of
    reasonrl's trainer modes (where its counters are logged), and if it scores rows with a model,
    has a model to ask (verl's reward model, or ``judge_url`` + ``judge_model``);
    otherwise the first such response would stop the run mid-step."""
    from omegaconf import OmegaConf

    if not uses_our_reward_function(config):
        return
    require_trainer_mode(
        config, "the model_rewards step counters (a trainer callback; +reasonrl/model_rewards=<option>)"
    )
    settings = settings_from(config)
    served = bool(OmegaConf.select(config, "reward.reward_model.enable", default=False))
    if _scores_with_a_model(settings) and not served and not (settings.judge_url and settings.judge_model):
        raise ConfigError(
            "reasonrl.model_rewards",
            "rows are scored by a model (rm_domains / judge_domains) but none is served: set "
            "reward.reward_model.enable=true with reward.reward_model.model_path (e.g. +preset=cpu_tiny_judge on CPU), "
            "or judge_url and judge_model",
        )
