"""Kimi k1.5 §2.3.4 curriculum *then* prioritized sampling in one run, and MiMo §3.2's offline
difficulty filter per domain (math > 0.9, code only 16/16), with the option files that turn
them on (hydra_configs/reasonrl/sampling/{kimi,mimo}.yaml) and the verl adapter's columns."""

from __future__ import annotations

import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from omegaconf import OmegaConf

from reasonrl.api import build_sampler
from reasonrl.config import ConfigError
from reasonrl.plugins.sampling.verl_adapter import SamplingCallback, _text_column
from reasonrl.state_io import digest, load_state, save_state

OPTIONS = Path(__file__).resolve().parents[3] / "hydra_configs" / "reasonrl" / "sampling"
PAIR = ["curriculum", "prioritized"]

#: 99.9% quantile of the chi-square distribution with 11 degrees of freedom (12 prompts)
CHI2_999_DF11 = 31.264


def chi_square(observed, expected) -> float:
    return float(((observed - expected) ** 2 / expected).sum())


def scores(successes: int, of: int = 10) -> list[float]:
    return [1.0] * successes + [0.0] * (of - successes)


# ----------------------------------------------------------------- Kimi: curriculum, then prioritized
def test_curriculum_draws_inside_its_window_until_the_switch_then_prioritized_takes_over():
    pass_rates = np.linspace(1.0, 0.0, 100)  # prompt p has curriculum rank p (0 easiest)
    sampler = build_sampler(PAIR, list(range(100)), pass_rates=pass_rates, pace_steps=10, start_fraction=0.2, seed=0)
    for step in range(10):  # prioritized_from_step null: the switch is at pace_steps
        batch = sampler.sample(10)
        window = sampler.selector.curriculum.window
        assert -1e-9 <= window - 100 * (0.2 + 0.08 * step) <= 1 + 1e-9  # ceil of the linear pace
        assert max(batch) < window, (step, batch, window)
        metrics = sampler.metrics()
        assert metrics["sampling/phase"] == 0 and metrics["sampling/curriculum_centre"] == pass_rates[window - 1]
        sampler.update({p: scores(p // 10) for p in batch})
    assert max(batch) >= 60, "the window grew: the last curriculum batch reaches past the first 60%"
    sampler.sample(10)
    metrics = sampler.metrics()
    assert metrics["sampling/phase"] == 1 and "sampling/curriculum_centre" not in metrics
    # the prioritized selector saw every outcome of the curriculum phase
    seen = sampler.stats.attempts > 0
    rate = sampler.stats.successes / np.maximum(sampler.stats.attempts, 1)
    expected = np.where(seen, 1 - (rate * sampler.stats.attempts) / (sampler.stats.attempts + 1), 1.0)
    assert seen.sum() >= 50 and np.allclose(sampler.selector.prioritized.tree.weights(), expected)


def test_after_the_switch_draw_frequencies_follow_one_minus_success_rate():
    successes = np.array([9, 8, 7, 6, 5, 5, 4, 3, 2, 1, 1, 0])  # of 10, easy → hard like the pass rates
    sampler = build_sampler(
        PAIR,
        list(range(12)),
        pass_rates=np.linspace(1.0, 0.0, 12),
        pace_steps=3,
        prioritized_from_step=6,  # three whole-pool curriculum batches: every prompt seen once
        start_fraction=0.25,
        smoothing=0.0,
        seed=4,
    )
    for _ in range(6):
        batch = sampler.sample(12)
        assert sampler.selector.phase == 0 and max(batch) < sampler.selector.curriculum.window
        sampler.update({p: scores(successes[p]) for p in batch})
    assert (sampler.stats.attempts > 0).all()
    counts = np.zeros(12)
    for _ in range(400):
        counts += np.bincount(sampler.sample(50), minlength=12)
    assert sampler.selector.phase == 1
    share = (1 - successes / 10) / (1 - successes / 10).sum()
    assert chi_square(counts, counts.sum() * share) < CHI2_999_DF11, counts
    # the test can fail: uniform (the curriculum's whole-pool epochs) is far off
    assert chi_square(counts, np.full(12, counts.sum() / 12)) > 10 * CHI2_999_DF11


@pytest.mark.parametrize("save_after", [4, 15], ids=["mid_curriculum", "after_switch"])
def test_state_round_trip_in_either_phase(tmp_path, save_after):
    rng = np.random.default_rng(0)
    rates = rng.random(300)
    names = ["difficulty_filter", *PAIR, "easy_pool", "dynamic"]
    options = dict(pass_rates=rates, pace_steps=8, prioritized_from_step=10, filter_threshold=0.95, seed=3)

    def play(sampler, steps):
        out = []
        for _ in range(steps):
            batch = sampler.sample(16)
            out.append((batch, sampler.sample(4, refill=True), sampler.selector.phase))
            sampler.update({p: (rng.random(4) < rates[p]).astype(float).tolist() for p in batch})
        return out

    original = build_sampler(names, list(range(300)), **options)
    play(original, save_after)
    assert original.selector.phase == (save_after >= 10)
    save_state(tmp_path / "state.npz", original.state_dict())
    rng_state = rng.bit_generator.state
    expected = play(original, 12)
    assert {phase for *_, phase in expected} == {1} if save_after >= 10 else {0, 1}
    restored = build_sampler(names, list(range(300)), **options)
    restored.load_state_dict(load_state(tmp_path / "state.npz"))
    rng.bit_generator.state = rng_state
    assert play(restored, 12) == expected
    assert digest(restored.state_dict()) == digest(original.state_dict())


def test_without_a_difficulty_the_pair_fails_unless_the_curriculum_is_optional():
    with pytest.raises(ConfigError) as error:
        build_sampler(PAIR, list(range(5)), pace_steps=3)
    assert error.value.key == "reasonrl.sampling.samplers" and "pass rate" in str(error.value)
    with pytest.warns(UserWarning, match="curriculum is skipped"):
        sampler = build_sampler(PAIR, list(range(5)), pace_steps=3, curriculum_optional=True, smoothing=0.0)
    assert sampler.selector.curriculum is None and sampler.metrics()["sampling/phase"] == 1
    sampler.update({0: [1.0, 1.0], 1: [0.0, 1.0]})
    assert np.allclose(sampler.selector.prioritized.tree.weights(), [0.0, 0.5, 1.0, 1.0, 1.0])
    assert 0 not in sampler.sample(50), "solved: never drawn (prioritized from step 0)"
    # a difficulty label is enough for the curriculum; the knob then changes nothing
    labelled = build_sampler(
        PAIR, list(range(5)), difficulty=[5, 1, 2, 3, 4], pace_steps=3, start_fraction=0.2, curriculum_optional=True
    )
    assert labelled.selector.phase == 0 and labelled.sample(1) == [1]
    # a state saved with a curriculum phase does not load into a run without one
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="curriculum phase"):
            sampler.load_state_dict(labelled.state_dict())


@pytest.mark.parametrize(
    "names",
    [
        ["prioritized", "curriculum"],
        ["curriculum", "gaussian_curriculum"],
        ["prioritized", "gaussian_curriculum"],
        ["curriculum", "prioritized", "gaussian_curriculum"],
    ],
)
def test_any_other_pair_of_selectors_is_refused(names):
    with pytest.raises(ConfigError, match="the one allowed pair") as error:
        build_sampler(names, [1, 2], pass_rates=[0.1, 0.2], pace_steps=3)
    assert error.value.key == "reasonrl.sampling.samplers"


@pytest.mark.parametrize("value", [0, -2, 1.5, "5"])
def test_prioritized_from_step_is_validated(value):
    with pytest.raises(ConfigError) as error:
        build_sampler(PAIR, [1, 2], pass_rates=[0.1, 0.2], pace_steps=3, prioritized_from_step=value)
    assert error.value.key == "reasonrl.sampling.prioritized_from_step"


# ----------------------------------------------------------------- MiMo §3.2: offline filter per domain
MIMO_RULES = {"code": {"threshold": 1.0, "inclusive": True}}


def test_mimo_drops_math_above_ninety_percent_but_code_only_when_always_solved():
    cases = {  # id: (domain, passes of 16)
        "math_15": ("math", 15),
        "math_14": ("math", 14),
        "code_15": ("code", 15),
        "code_16": ("code", 16),
        "science_15": ("science", 15),  # no rule: filter_threshold / filter_inclusive
        "unlabelled_15": (None, 15),
    }
    ids = list(cases)
    sampler = build_sampler(
        "difficulty_filter",
        ids,
        pass_rates={i: k / 16 for i, (_, k) in cases.items()},
        domains={i: d for i, (d, _) in cases.items()},
        filter_threshold=0.9,
        filter_inclusive=False,
        domain_filters=MIMO_RULES,
    )
    kept = set(sampler.ids[sampler.kept].tolist())
    assert kept == {"math_14", "code_15"}
    assert sampler.metrics()["sampling/pool_filtered_offline"] == 4
    # without the code rule the single threshold drops code solved 15/16 too
    single = build_sampler(
        "difficulty_filter",
        ids,
        pass_rates=[k / 16 for _, k in cases.values()],
        domains=[d for d, _ in cases.values()],
        filter_threshold=0.9,
        filter_inclusive=False,
    )
    assert set(single.ids[single.kept].tolist()) == {"math_14"}


def test_the_mimo_option_file_applies_the_per_domain_rules():
    section = OmegaConf.to_container(OmegaConf.load(OPTIONS / "mimo.yaml").reasonrl.sampling)
    assert section["domain_filters"] == MIMO_RULES and section["domain_column"] == "ability"
    section["samplers"] = ["difficulty_filter", *section["samplers"]]
    names = section.pop("samplers")
    domains = ["math", "math", "code", "code"]
    sampler = build_sampler(
        names, list(range(4)), pass_rates=[15 / 16, 14 / 16, 15 / 16, 1.0], domains=domains, **section
    )
    assert sampler.kept.tolist() == [False, True, True, False]


def test_domain_filters_need_domain_labels():
    with pytest.raises(ConfigError) as error:
        build_sampler("difficulty_filter", [1, 2], pass_rates=[0.1, 0.2], domain_filters=MIMO_RULES)
    assert error.value.key == "reasonrl.sampling.domain_filters"
    with pytest.raises(ConfigError) as error:
        build_sampler("difficulty_filter", [1, 2], pass_rates=[0.1, 0.2], domains=["math"], domain_filters=MIMO_RULES)
    assert error.value.key == "domains"
    # not listed: the rules (like filter_threshold) wait for difficulty_filter
    build_sampler("dynamic", [1, 2], domain_filters=MIMO_RULES)


@pytest.mark.parametrize(
    ("rules", "key"),
    [
        ({"code": {"threshold": 1.5, "inclusive": True}}, "reasonrl.sampling.domain_filters.code.threshold"),
        ({"code": {"threshold": -0.1, "inclusive": True}}, "reasonrl.sampling.domain_filters.code.threshold"),
        ({"code": {"threshold": "high", "inclusive": True}}, "reasonrl.sampling.domain_filters.code.threshold"),
        ({"code": {"threshold": True, "inclusive": True}}, "reasonrl.sampling.domain_filters.code.threshold"),
        ({"code": {"threshold": 1.0, "inclusive": "yes"}}, "reasonrl.sampling.domain_filters.code.inclusive"),
        ({"code": {"threshold": 1.0}}, "reasonrl.sampling.domain_filters.code.inclusive"),
        (
            {"code": {"threshold": 1.0, "inclusive": True, "trheshold": 1}},
            "reasonrl.sampling.domain_filters.code.trheshold",
        ),
        ({"code": 1.0}, "reasonrl.sampling.domain_filters.code"),
        ([("code", 1.0)], "reasonrl.sampling.domain_filters"),
    ],
)
def test_bad_domain_filters_fail_naming_the_key(rules, key):
    with pytest.raises(ConfigError) as error:
        build_sampler("difficulty_filter", [1], pass_rates=[0.1], domains=["code"], domain_filters=rules)
    assert error.value.key == key, str(error.value)


# ----------------------------------------------------------------- verl adapter and the kimi option file
class FakeFrame:
    """The part of a HF ``datasets.Dataset`` the adapter reads."""

    def __init__(self, columns: dict):
        self.columns = columns
        self.column_names = list(columns)

    def __getitem__(self, name):
        return self.columns[name]


def fake_trainer(columns: dict, rows: int, steps: int = 5):
    dataset = type("Dataset", (), {"dataframe": FakeFrame(columns), "__len__": lambda self: rows})()
    return SimpleNamespace(train_dataset=dataset, total_training_steps=steps)


def settings_of(option: str, **overrides):
    from reasonrl.config import validate_group
    from reasonrl.plugins.sampling.config import SAMPLING_GROUP

    section = OmegaConf.to_container(OmegaConf.load(OPTIONS / f"{option}.yaml").reasonrl.sampling)
    return validate_group(SAMPLING_GROUP, {**section, **overrides})


def test_adapter_reads_the_domain_label_top_level_or_from_extra_info():
    top = fake_trainer({"ability": ["math", "code", "code"], "pass_rate": [15 / 16, 15 / 16, 1.0]}, 3)
    assert _text_column(top.train_dataset, "ability") == ["math", "code", "code"]
    nested = fake_trainer({"extra_info": [{"domain": "code"}, {"domain": None}]}, 2)
    assert _text_column(nested.train_dataset, "domain") == ["code", None]
    assert _text_column(nested.train_dataset, "ability") is None
    callback = SamplingCallback(settings_of("mimo", samplers=["difficulty_filter", "easy_pool", "dynamic"]))
    callback.on_init_end(top)
    assert callback.sampler.kept.tolist() == [False, True, False]
    missing = SamplingCallback(
        settings_of("mimo", samplers=["difficulty_filter", "easy_pool", "dynamic"], domain_column="domain")
    )
    with pytest.raises(ConfigError) as error:
        missing.on_init_end(top)
    assert error.value.key == "reasonrl.sampling.domain_column"


def test_kimi_option_runs_the_curriculum_when_the_data_has_pass_rates_and_prioritized_when_not(capsys):
    settings = settings_of("kimi")
    assert settings.samplers == PAIR and settings.curriculum_optional
    # data with neither a pass_rate nor a difficulty label (e.g. smoke data without extra_info.pass_rate)
    smoke = fake_trainer({"ability": ["math"] * 6, "extra_info": [{"index": i} for i in range(6)]}, 6, steps=3)
    callback = SamplingCallback(settings_of("kimi"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the adapter prints instead of warning twice
        callback.on_init_end(smoke)
    assert "curriculum is skipped" in capsys.readouterr().out
    assert callback.sampler.selector.phase == 1 and len(callback.sampler.sample(4)) == 4
    # data with a pass rate: the curriculum first
    rated = fake_trainer({"extra_info": [{"index": i, "pass_rate": 1 - i / 10} for i in range(10)]}, 10, steps=50)
    callback = SamplingCallback(settings_of("kimi"))
    callback.on_init_end(rated)
    sampler = callback.sampler
    assert sampler.selector.phase == 0 and sampler.selector.switch_step == settings.pace_steps
    assert max(sampler.sample(2)) < sampler.selector.curriculum.window < 10
    strict = SamplingCallback(settings_of("kimi", curriculum_optional=False))
    with pytest.raises(ConfigError) as error:
        strict.on_init_end(smoke)
    assert error.value.key == "reasonrl.sampling.pass_rate_column"
