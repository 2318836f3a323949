"""Calibration and the three schemes on hand-computed examples (MiMo §3.3.1), plus properties."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonrl import api
from reasonrl.plugins.rewards.difficulty import TestDifficulty, calibrate, cluster_1d, reward


def matrix(pass_counts: list[int], solutions: int) -> list[list[bool]]:
    """solutions × tests booleans where test j passes for the first pass_counts[j] solutions."""
    return [[row < count for count in pass_counts] for row in range(solutions)]


def test_three_levels_by_hand():
    # pass rates 1.0, 0.9, 0.5, 0.4, 0.0 → {1.0, 0.9} easiest, {0.5, 0.4}, {0.0} hardest
    calibration = api.calibrate_difficulty(matrix([10, 9, 5, 4, 0], 10), levels=3)
    assert calibration.pass_rates == (1.0, 0.9, 0.5, 0.4, 0.0)
    assert calibration.levels == (0, 0, 1, 1, 2)
    assert calibration.level_scores == pytest.approx((1 / 3, 1 / 3, 1 / 3))
    passed = [True, True, True, False, True]
    assert api.test_difficulty_reward(passed, calibration, "strict") == pytest.approx(1 / 3)
    assert api.test_difficulty_reward(passed, calibration, "soft") == pytest.approx(1 / 6 + 1 / 6 + 1 / 6 + 1 / 3)
    assert api.test_difficulty_reward(passed, calibration, "all_or_nothing") == 0.0
    # the hardest level alone earns nothing under strict, its share under soft
    only_hardest = [False, False, False, False, True]
    assert reward(only_hardest, calibration, "strict") == 0.0
    assert reward(only_hardest, calibration, "soft") == pytest.approx(1 / 3)
    assert (
        reward([True] * 5, calibration, "strict")
        == pytest.approx(1.0)
        == reward([True] * 5, calibration, "all_or_nothing")
    )


def test_ties_in_pass_rate_share_a_level_and_fewer_levels_are_made():
    calibration = calibrate(matrix([2, 2, 2, 0], 4), levels=3)  # rates .5 .5 .5 0: two distinct values
    assert calibration.levels == (0, 0, 0, 1)
    assert calibration.level_scores == (0.5, 0.5)
    assert reward([True, True, False, True], calibration, "strict") == 0.0
    assert reward([True, True, False, True], calibration, "soft") == pytest.approx(0.5 * 2 / 3 + 0.5)


def test_a_problem_with_one_test():
    calibration = calibrate([[True], [False], [True]], levels=3)
    assert calibration.levels == (0,) and calibration.level_scores == (1.0,)
    assert calibration.pass_rates == pytest.approx((2 / 3,))
    for scheme in ("strict", "soft", "all_or_nothing"):
        assert reward([True], calibration, scheme) == 1.0
        assert reward([False], calibration, scheme) == 0.0


def test_all_pass_and_all_fail_columns_with_configured_scores():
    verdicts = [[True, False, True], [True, False, False]]  # rates 1.0, 0.0, 0.5
    calibration = calibrate(verdicts, levels=3, level_scores=[0.2, 0.3, 0.5])
    assert calibration.levels == (0, 2, 1)
    assert calibration.level_scores == (0.2, 0.3, 0.5)
    assert reward([True, False, True], calibration, "strict") == pytest.approx(0.5)
    assert reward([True, False, True], calibration, "soft") == pytest.approx(0.5)
    assert reward([True, True, False], calibration, "strict") == pytest.approx(0.2)
    assert reward([True, True, False], calibration, "soft") == pytest.approx(0.7)
    # two distinct rates only: the first two scores, renormalised
    assert calibrate(
        [[True, False], [True, False]], levels=3, level_scores=[0.2, 0.3, 0.5]
    ).level_scores == pytest.approx((0.4, 0.6))


def test_calibration_round_trips_through_json():
    calibration = calibrate(matrix([3, 2, 1, 0], 3), levels=2)
    assert TestDifficulty.from_json(json.loads(json.dumps(calibration.to_json()))) == calibration


@pytest.mark.parametrize("bad", [dict(levels=0), dict(level_scores=[1.0]), dict(level_scores=[-1, 1, 1])])
def test_bad_arguments_are_refused(bad):
    with pytest.raises(ValueError):
        calibrate(matrix([1, 0], 2), **({"levels": 3} | bad))


def _brute_force_sse(values: list[float], k: int) -> float:
    """Best within-cluster SSE over every split of the sorted distinct values into k runs."""
    distinct = sorted(set(values))
    k = min(k, len(distinct))
    best = float("inf")
    for cuts in itertools.combinations(range(1, len(distinct)), k - 1):
        bounds = (0, *cuts, len(distinct))
        total = 0.0
        for lo, hi in zip(bounds, bounds[1:]):
            members = [v for v in values if distinct[lo] <= v <= distinct[hi - 1]]
            mean = sum(members) / len(members)
            total += sum((v - mean) ** 2 for v in members)
        best = min(best, total)
    return best


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=1, max_size=9), st.integers(1, 4))
def test_clustering_is_optimal_and_ordered(counts, k):
    values = [c / 8 for c in counts]
    clusters = cluster_1d(values, k)
    sse = 0.0
    for c in set(clusters):
        members = [v for v, cc in zip(values, clusters) if cc == c]
        sse += sum((v - sum(members) / len(members)) ** 2 for v in members)
    assert sse == pytest.approx(_brute_force_sse(values, k), abs=1e-9)
    for a, b in itertools.combinations(range(len(values)), 2):  # higher pass rate → easier (smaller) level
        if values[a] > values[b]:
            assert clusters[a] <= clusters[b]
        if values[a] == values[b]:
            assert clusters[a] == clusters[b]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_scheme_order(data):
    tests = data.draw(st.integers(1, 8))
    verdicts = data.draw(st.lists(st.lists(st.booleans(), min_size=tests, max_size=tests), min_size=1, max_size=6))
    passed = data.draw(st.lists(st.booleans(), min_size=tests, max_size=tests))
    calibration = calibrate(verdicts, levels=data.draw(st.integers(1, 4)))
    strict, soft, all_or_nothing = (reward(passed, calibration, s) for s in ("strict", "soft", "all_or_nothing"))
    assert 0.0 <= all_or_nothing <= strict + 1e-12 <= soft + 2e-12 <= 1.0 + 1e-9


def test_rows_carrying_reference_verdicts_get_their_calibration_and_others_are_left_alone():
    from reasonrl.plugins.rewards.difficulty import calibrate_rows

    verdicts = matrix([3, 2, 0], 3)
    code = {"reward_model": {"ground_truth": json.dumps({"inputs": ["1\n"], "outputs": ["2\n"]})},
            "extra_info": {"solution_test_verdicts": verdicts}}  # fmt: skip
    fixed = {"difficulty": {"levels": [0]}, "inputs": ["1\n"], "outputs": ["2\n"]}
    kept = {"reward_model": {"ground_truth": json.dumps(fixed)}, "extra_info": {"solution_test_verdicts": verdicts}}
    math = {"reward_model": {"ground_truth": "4"}, "extra_info": {"solution_test_verdicts": verdicts}}
    calibrate_rows(rows := [code, kept, math])
    assert json.loads(rows[0]["reward_model"]["ground_truth"])["difficulty"] == calibrate(verdicts).to_json()
    assert json.loads(rows[1]["reward_model"]["ground_truth"]) == fixed  # an existing calibration stays
    assert rows[2]["reward_model"]["ground_truth"] == "4"  # not a code row: left alone, verdicts too
    assert [("solution_test_verdicts" in row["extra_info"]) for row in rows] == [False, False, True]
