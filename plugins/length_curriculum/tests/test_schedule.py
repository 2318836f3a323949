"""The framework-free rule: stays below the trigger, steps once at it, never past the last
stage, patience honoured, state round trip; the per-request cap."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reasonrl.plugins.length_curriculum.schedule import LengthCurriculum, cap_sampling_params, check_stages

STAGES = (100, 200, 300)


def curriculum(**kw) -> LengthCurriculum:
    return LengthCurriculum(STAGES, **{"quantile": 0.9, "trigger_fraction": 0.9, **kw})


def lengths_with_q90(value: float, n: int = 10) -> list[float]:
    """n lengths whose 0.9-quantile (numpy linear) is exactly ``value``: all equal."""
    return [value] * n


def test_quantile_is_numpys_linear_quantile():
    c = curriculum()
    values = list(range(1, 11))  # q0.9 of 1..10 (linear) = 9.1
    assert c.quantile_length(values) == pytest.approx(9.1)
    assert math.isnan(c.quantile_length([]))


def test_stays_below_the_trigger():
    c = curriculum()
    for _ in range(20):
        # 89 < 0.9·100: no step however long it runs
        assert c.observe(lengths_with_q90(89.0)) is False
    assert (c.stage, c.limit) == (0, 100)


def test_the_quantile_not_the_mean_or_max_decides():
    c = curriculum()
    # 8 of 10 at 95 and two short ones: q0.9 = 95 ≥ 90 although the mean (78) is below
    assert c.observe([95] * 8 + [10, 10]) is True and c.limit == 200
    c = curriculum()
    # one outlier at the limit: q0.9 = 0.9·100 + 0.1·10 … below the trigger, the max is not
    lengths = [10] * 9 + [100]
    assert c.quantile_length(lengths) < 90 and c.observe(lengths) is False


def test_steps_once_at_the_trigger_then_needs_the_next_stage_trigger():
    c = curriculum()
    assert c.observe(lengths_with_q90(90.0)) is True  # exactly f·L counts
    assert (c.stage, c.limit) == (1, 200)
    # 90 was enough at 100, not at 200 (trigger 180)
    assert c.observe(lengths_with_q90(90.0)) is False and c.limit == 200
    assert c.observe(lengths_with_q90(179.0)) is False
    assert c.observe(lengths_with_q90(180.0)) is True and c.limit == 300


def test_never_past_the_last_stage():
    c = curriculum()
    steps = [c.observe(lengths_with_q90(float(c.limit))) for _ in range(10)]
    assert steps == [True, True] + [False] * 8
    assert c.at_last_stage and c.limit == STAGES[-1] and c.stage == len(STAGES) - 1


def test_patience_needs_consecutive_steps_and_restarts_below_and_after_a_step():
    c = curriculum(patience_steps=3)
    hit, miss = lengths_with_q90(95.0), lengths_with_q90(50.0)
    assert [c.observe(hit), c.observe(hit)] == [False, False]
    assert c.observe(miss) is False and c.streak == 0  # one step below: the count restarts
    assert [c.observe(hit), c.observe(hit), c.observe(hit)] == [False, False, True]
    assert c.limit == 200 and c.streak == 0
    # at 200 the trigger is 180: three more consecutive hits needed
    high = lengths_with_q90(190.0)
    assert [c.observe(high), c.observe(high), c.observe(high)] == [False, False, True]
    assert c.limit == 300


def test_empty_step_changes_nothing():
    c = curriculum(patience_steps=2)
    c.observe(lengths_with_q90(95.0))
    assert c.observe([]) is False and c.streak == 1 and c.stage == 0


def test_state_round_trip_resumes_mid_streak():
    c = curriculum(patience_steps=2)
    c.observe(lengths_with_q90(95.0))
    c.observe(lengths_with_q90(95.0))  # → stage 1
    c.observe(lengths_with_q90(185.0))  # streak 1 at stage 1
    state = c.state_dict()
    restored = curriculum(patience_steps=2)
    restored.load_state_dict(state)
    assert (restored.stage, restored.streak, restored.limit) == (1, 1, 200)
    # the restored one and the original behave the same from here
    assert restored.observe(lengths_with_q90(185.0)) is c.observe(lengths_with_q90(185.0)) is True
    assert restored.limit == c.limit == 300


def test_state_with_changed_stages_maps_onto_the_saved_limit():
    c = curriculum()
    c.observe(lengths_with_q90(95.0))  # limit 200
    other = LengthCurriculum([150, 250, 300])
    other.load_state_dict(c.state_dict())
    assert other.limit == 150 and other.streak == 0
    smaller = LengthCurriculum([300, 400])
    smaller.load_state_dict(c.state_dict())
    assert smaller.limit == 300


@pytest.mark.parametrize(
    ("stages", "message"),
    [([], "at least one"), ([0, 10], ">= 1"), ([10, 10], "strictly increasing"), ([20, 10], "strictly increasing")],
)
def test_bad_stages_are_refused(stages, message):
    with pytest.raises(ValueError, match=message):
        check_stages(stages)


@pytest.mark.parametrize("kw", [{"quantile": 0.0}, {"trigger_fraction": 1.5}, {"patience_steps": 0}])
def test_bad_rule_values_are_refused(kw):
    with pytest.raises(ValueError):
        curriculum(**kw)


def test_numpy_integer_stages_are_accepted():
    assert check_stages(np.array([16, 24, 32])) == (16, 24, 32)


def test_cap_sampling_params():
    params = {"temperature": 1.0}
    assert cap_sampling_params(params, None, 32) is params  # no limit: untouched (validation)
    capped = cap_sampling_params(params, 16, 32)
    assert capped == {"temperature": 1.0, "max_tokens": 16} and params == {"temperature": 1.0}
    assert cap_sampling_params(params, np.int64(64), 32)["max_tokens"] == 32  # never above the configured length
    with pytest.raises(ValueError):
        cap_sampling_params(params, 0, 32)
