"""Knob validation: keys, types, ranges, choices and cross-field checks name the full key."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reasonrl.config import ConfigError, allowed_range, knob, validate_group, validate_reasonrl_section
from reasonrl.contracts import ConfigGroup


@dataclass
class ClipKnobs:
    eps_low: float = knob(0.2, help="lower clip", low=0.0, high=1.0, low_open=True, high_open=True)
    eps_high_cap: float = knob(3.0, help="dual-clip floor", low=1.0, low_open=True)
    schedule: str = knob("constant", help="schedule", choices=["constant", "linear", "step"])
    steps: int = knob(10, help="steps", low=1)
    warmup: int | None = knob(None, help="optional warm-up steps", low=0)
    milestones: list = knob([100, 200], help="step milestones")

    def check(self) -> None:
        if self.schedule == "step" and not self.milestones:
            raise ConfigError("reasonrl.clip.milestones", "must be non-empty when schedule=step")


GROUP = ConfigGroup("clip", ClipKnobs)


def test_defaults_validate_and_mutable_defaults_are_copied():
    first, second = validate_group(GROUP, {}), validate_group(GROUP, {})
    first.milestones.append(1)
    assert second.milestones == [100, 200]


def test_int_accepted_for_float_and_converted():
    assert validate_group(GROUP, {"eps_high_cap": 2}).eps_high_cap == 2.0


@pytest.mark.parametrize(
    ("values", "key", "fragment"),
    [
        ({"eps_low": 1.0}, "reasonrl.clip.eps_low", "(0.0, 1.0)"),
        ({"eps_low": 0.0}, "reasonrl.clip.eps_low", "(0.0, 1.0)"),
        ({"eps_high_cap": 1.0}, "reasonrl.clip.eps_high_cap", "(1.0, inf)"),
        ({"steps": 0}, "reasonrl.clip.steps", "[1, inf)"),
        ({"schedule": "cosine"}, "reasonrl.clip.schedule", "one of ['constant', 'linear', 'step']"),
        ({"steps": 2.5}, "reasonrl.clip.steps", "expected int"),
        ({"steps": True}, "reasonrl.clip.steps", "expected int"),
        ({"eps_low": "0.2"}, "reasonrl.clip.eps_low", "expected float"),
        ({"eps_low": None}, "reasonrl.clip.eps_low", "must not be null"),
        ({"eps_lwo": 0.1}, "reasonrl.clip.eps_lwo", "Did you mean 'eps_low'?"),
        ({"schedule": "step", "milestones": []}, "reasonrl.clip.milestones", "non-empty"),
    ],
)
def test_bad_values_name_key_and_allowed_range(values, key, fragment):
    with pytest.raises(ConfigError) as info:
        validate_group(GROUP, values)
    assert info.value.key == key
    assert fragment in str(info.value)


def test_optional_knob_accepts_null_and_checks_range_otherwise():
    assert validate_group(GROUP, {"warmup": None}).warmup is None
    with pytest.raises(ConfigError, match="reasonrl.clip.warmup"):
        validate_group(GROUP, {"warmup": -1})


def test_check_raising_plain_valueerror_is_attributed_to_the_group():
    @dataclass
    class Pair:
        low: float = knob(0.1, help="low")
        high: float = knob(0.2, help="high")

        def check(self):
            if self.low >= self.high:
                raise ValueError("low must be below high")

    with pytest.raises(ConfigError) as info:
        validate_group(ConfigGroup("pair", Pair), {"low": 0.5})
    assert info.value.key == "reasonrl.pair"


def test_section_rejects_unknown_group_with_suggestion_and_skips_reserved_keys():
    with pytest.raises(ConfigError) as info:
        validate_reasonrl_section({"clp": {}}, {"clip": GROUP})
    assert info.value.key == "reasonrl.clp" and "reasonrl.clip" in str(info.value)
    assert validate_reasonrl_section({"recipe": {"name": "x"}, "preset": "cpu_tiny"}, {}) == {}
    with pytest.raises(ConfigError, match="must be a mapping"):
        validate_reasonrl_section({"clip": 3}, {"clip": GROUP})


def _reference_in_range(x: float, low: float, high: float, low_open: bool, high_open: bool) -> bool:
    above = x > low if low_open else x >= low
    below = x < high if high_open else x <= high
    return above and below


@given(
    x=st.floats(allow_nan=False, allow_infinity=False, min_value=-10, max_value=10),
    low=st.floats(min_value=-5, max_value=0),
    high=st.floats(min_value=0, max_value=5),
    low_open=st.booleans(),
    high_open=st.booleans(),
)
def test_range_check_matches_interval_definition(x, low, high, low_open, high_open):
    @dataclass
    class One:
        v: float = knob(0.0, help="v", low=low, high=high, low_open=low_open, high_open=high_open)

    group = ConfigGroup("one", One)
    if _reference_in_range(x, low, high, low_open, high_open):
        assert validate_group(group, {"v": x}).v == x
    else:
        with pytest.raises(ConfigError):
            validate_group(group, {"v": x})


def test_allowed_range_text():
    assert allowed_range({"low": 0, "high": 1, "low_open": True}) == "(0, 1]"
    assert allowed_range({"low": None, "high": None}) == "any value"
    assert allowed_range({"high": 2.0}) == "(-inf, 2.0]"


@pytest.mark.parametrize("recipe", ["mimo", "kimi_k15", "longcat", "nemotron"])
def test_every_recipes_plugins_accept_any_of_reasonrls_trainer_modes(recipe):
    """The plugins' callbacks run in trainer mode reasonrl_sync and reasonrl_colocate_async alike
    (one trainer mixin); a mode without reasonrl's callbacks is refused, naming the key."""
    from reasonrl.api import validate_config
    from reasonrl.cli.train import compose_config

    for mode in ("reasonrl_sync", "reasonrl_colocate_async"):
        validate_config(compose_config([f"recipe={recipe}", "+preset=cpu_tiny", f"trainer.v1.trainer_mode={mode}"]))
    with pytest.raises(ConfigError) as error:
        validate_config(compose_config([f"recipe={recipe}", "+preset=cpu_tiny", "trainer.v1.trainer_mode=sync"]))
    assert error.value.key == "trainer.v1.trainer_mode" and "reasonrl_colocate_async" in str(error.value)


def test_pin_run_paths_passes_the_metrics_file_to_ray_workers_with_or_without_preset_env_vars(tmp_path, monkeypatch):
    """verl's file logger runs in the TaskRunner: the launch's own metrics file reaches it only
    through Ray's runtime env, also when the preset defines no ``env_vars`` (or no runtime_env)."""
    from omegaconf import OmegaConf

    from reasonrl.cli.train import pin_run_paths

    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    monkeypatch.chdir(tmp_path)
    for ray_init in ({}, {"runtime_env": {}}, {"runtime_env": {"env_vars": {"VERL_PLATFORM": "cpu"}}}):
        config = OmegaConf.create(
            {
                "trainer": {"default_local_dir": "run", "logger": ["console", "file"]},
                "ray_kwargs": {"ray_init": ray_init},
            }
        )
        path = pin_run_paths(config)
        assert config.trainer.default_local_dir == str(tmp_path / "run")
        assert path.parent == tmp_path / "run" / "metrics" and path.suffix == ".jsonl"
        env_vars = config.ray_kwargs.ray_init.runtime_env.env_vars
        assert env_vars.VERL_FILE_LOGGER_PATH == str(path), ray_init
        assert env_vars.get("VERL_PLATFORM", "cpu") == "cpu", "the preset's variables are kept"
