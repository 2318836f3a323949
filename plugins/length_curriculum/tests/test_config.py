"""Knobs and cross-key rules at start-up (the key and the allowed range named), and the option files."""

from __future__ import annotations

import pytest

from reasonrl.config import ConfigError

TINY = ["recipe=longcat", "+preset=cpu_tiny", "+reasonrl/length_curriculum=longcat_code"]


def compose(*overrides: str):
    from reasonrl.composition import compose_config

    return compose_config(list(overrides))


def validate(*overrides: str):
    from reasonrl.api import validate_config

    return validate_config(compose(*overrides))


def test_longcat_option_file_validates_and_selects_the_capped_loop():
    from reasonrl.config import config_value

    config = compose("recipe=longcat", "+reasonrl/length_curriculum=longcat_code")
    validate("recipe=longcat", "+reasonrl/length_curriculum=longcat_code")
    assert list(config.reasonrl.length_curriculum.stages) == [47104, 55296, 63488]
    assert config_value(config, "actor_rollout_ref.rollout.agent.default_agent_loop") == "reasonrl"
    assert config_value(config, "trainer.v1.trainer_mode") == "reasonrl_sync"
    # the last stage is the length the run (tensors, vLLM) is sized for: the recipe's own
    assert config_value(config, "actor_rollout_ref.rollout.response_length") == 63488
    assert config_value(config, "data.max_response_length") == 63488


def test_cpu_tiny_with_stages_up_to_its_response_length_validates():
    validate(*TINY, "reasonrl.length_curriculum.stages=[16,24,32]")


def test_off_by_default():
    config = compose("recipe=longcat")
    assert "length_curriculum" not in config.reasonrl
    validate("recipe=longcat")


def test_mimo_0530_needs_the_run_sized_at_its_last_stage():
    from reasonrl.config import config_value

    config = compose("recipe=mimo", "+reasonrl/length_curriculum=mimo_0530")
    stages = list(config.reasonrl.length_curriculum.stages)
    # the first stage is the mimo recipe's own budget; the run must be sized at the last
    assert stages[0] == config_value(config, "data.max_response_length") < stages[-1]
    with pytest.raises(ConfigError) as error:
        validate("recipe=mimo", "+reasonrl/length_curriculum=mimo_0530")
    assert error.value.key == "reasonrl.length_curriculum.stages"
    assert f"data.max_response_length ({stages[0]})" in str(error.value) and str(stages[-1]) in str(error.value)
    validate(
        "recipe=mimo",
        "+reasonrl/length_curriculum=mimo_0530",
        f"data.max_response_length={stages[-1]}",
        f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={stages[-1] + 2048}",
    )


@pytest.mark.parametrize(
    ("override", "key", "text"),
    [
        ("reasonrl.length_curriculum.quantile=0", "reasonrl.length_curriculum.quantile", "(0.0, 1.0]"),
        ("reasonrl.length_curriculum.quantile=1.5", "reasonrl.length_curriculum.quantile", "(0.0, 1.0]"),
        ("reasonrl.length_curriculum.trigger_fraction=0", "reasonrl.length_curriculum.trigger_fraction", "(0.0, 1.0]"),
        (
            "reasonrl.length_curriculum.trigger_fraction=1.1",
            "reasonrl.length_curriculum.trigger_fraction",
            "(0.0, 1.0]",
        ),
        ("reasonrl.length_curriculum.patience_steps=0", "reasonrl.length_curriculum.patience_steps", "[1, inf)"),
        ("reasonrl.length_curriculum.stages=[24,16,32]", "reasonrl.length_curriculum.stages", "strictly increasing"),
        ("reasonrl.length_curriculum.stages=[0,16,32]", "reasonrl.length_curriculum.stages", ">= 1"),
        ("reasonrl.length_curriculum.stages=[16,16,32]", "reasonrl.length_curriculum.stages", "strictly increasing"),
    ],
)
def test_bad_knobs_fail_naming_key_and_range(override, key, text):
    with pytest.raises(ConfigError) as error:
        validate(*TINY, override)
    assert error.value.key == key and text in str(error.value)


def test_last_stage_must_equal_max_response_length_naming_both_keys():
    with pytest.raises(ConfigError) as error:
        validate(*TINY, "reasonrl.length_curriculum.stages=[16,24]")
    message = str(error.value)
    assert error.value.key == "reasonrl.length_curriculum.stages"
    assert "data.max_response_length (32)" in message and "last stage (24)" in message


def test_rollout_response_length_must_match_too():
    with pytest.raises(ConfigError) as error:
        validate(*TINY, "reasonrl.length_curriculum.stages=[16,24,32]", "actor_rollout_ref.rollout.response_length=24")
    assert "actor_rollout_ref.rollout.response_length (24)" in str(error.value)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("trainer.v1.trainer_mode=sync", "trainer.v1.trainer_mode"),
        (
            "actor_rollout_ref.rollout.agent.default_agent_loop=single_turn_agent",
            "actor_rollout_ref.rollout.agent.default_agent_loop",
        ),
    ],
)
def test_the_curriculum_needs_its_trainer_mode_and_agent_loop(override, key):
    with pytest.raises(ConfigError) as error:
        validate(*TINY, "reasonrl.length_curriculum.stages=[16,24,32]", override)
    assert error.value.key == key


def test_the_reach_is_needed_only_with_the_curriculum():
    from reasonrl.plugins.length_curriculum.compat import AGENT_LOOP_CAP

    assert AGENT_LOOP_CAP.needed(compose(*TINY, "reasonrl.length_curriculum.stages=[16,24,32]"))
    assert not AGENT_LOOP_CAP.needed(compose("recipe=longcat", "+preset=cpu_tiny"))
