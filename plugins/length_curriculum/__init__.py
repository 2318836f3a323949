"""length_curriculum: the response-length limit grows in stages during RL.

LongCat-Flash-Thinking §3.4.1 (code RL: 48K → 56K → 64K, stepped up when the 90th percentile
of output lengths approaches the limit) and MiMo-7B-RL-0530 §3.6 (32K → 38K → 48K).

- ``schedule.py``: the framework-free rule (stages, quantile, trigger fraction, patience);
- ``verl_callback.py``: a callback of trainer mode ``reasonrl_sync`` that observes each step's
  response lengths, puts the current limit on every training batch and checkpoints its state;
- ``verl_request.py``: a request transform of reasonrl's agent loop ``reasonrl`` that caps each
  training request (``max_tokens``) at that limit; the run itself is configured at the last stage.
"""

from __future__ import annotations

from reasonrl.config import ConfigError, config_value, require_agent_loop, require_trainer_mode
from reasonrl.contracts import ConfigGroup, PluginInfo, TrainerCallback
from reasonrl.hookspecs import hookimpl
from reasonrl.plugins.length_curriculum.config import KEY, LENGTH_CURRICULUM_GROUP
from reasonrl.request_transforms import AGENT_LOOP


def _build_callback(config):
    from reasonrl.plugins.length_curriculum.verl_callback import build

    return build(config)


@hookimpl
def reasonrl_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="length_curriculum",
        summary="response-length curriculum: the generation limit steps up when the q-quantile of lengths nears it",
        reports=("LongCat-Flash-Thinking §3.4.1", "MiMo-7B-RL-0530 §3.6"),
    )


@hookimpl
def reasonrl_request_transforms(config) -> list:
    from reasonrl.plugins.length_curriculum.config import settings_from

    if not settings_from(config).stages:
        return []
    from reasonrl.plugins.length_curriculum.verl_request import length_cap

    return [length_cap]


@hookimpl
def reasonrl_trainer_callbacks() -> list[TrainerCallback]:
    return [TrainerCallback("length_curriculum", _build_callback)]


@hookimpl
def reasonrl_config_groups() -> list[ConfigGroup]:
    return [LENGTH_CURRICULUM_GROUP]


def check_length_curriculum(config) -> None:
    """The run is configured at the last stage, in trainer mode reasonrl_sync, with the capped loop."""
    from reasonrl.plugins.length_curriculum.config import settings_from

    stages = settings_from(config).stages
    if not stages:
        return
    last = int(stages[-1])
    for verl_key in ("data.max_response_length", "actor_rollout_ref.rollout.response_length"):
        value = config_value(config, verl_key)
        if value is None or int(value) != last:
            raise ConfigError(
                f"{KEY}.stages",
                f"the last stage ({last}) must equal {verl_key} ({value}): verl sizes the run once at the last "
                f"stage and the curriculum caps each request below it; set {verl_key}={last} or end "
                f"{KEY}.stages at {value}",
            )
    require_trainer_mode(config, "the length curriculum (a trainer callback; +reasonrl/length_curriculum=<option>)")
    require_agent_loop(config, AGENT_LOOP, "the length curriculum (requests capped per stage)")


@hookimpl
def reasonrl_check_config(config) -> None:
    check_length_curriculum(config)


@hookimpl
def reasonrl_reaches() -> list:
    # the upstream internals only this plugin uses, declared beside their accessors
    from reasonrl.plugins.length_curriculum.compat import REACHES

    return list(REACHES)
