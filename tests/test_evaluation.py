"""Unbiased pass@k (Chen et al. 2021) for the reports' sampled evaluation."""

from __future__ import annotations

import itertools
import math

import pytest

from reasonrl.evaluation import pass_at_k, pass_at_k_by_source, reported_ks, validation_pass_at_k


@pytest.mark.parametrize("n,c", [(4, 0), (4, 1), (5, 2), (6, 5), (8, 8)])
def test_pass_at_k_is_the_share_of_k_subsets_holding_a_correct_answer(n, c):
    answers = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(answers, k))
        exact = sum(any(subset) for subset in subsets) / len(subsets)
        assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12)
    assert pass_at_k(n, c, 1) == pytest.approx(c / n)  # pass@1 = avg@n


def test_bad_counts_are_refused():
    for n, c, k in ((4, 5, 1), (4, 1, 0), (4, 1, 5)):
        with pytest.raises(ValueError):
            pass_at_k(n, c, k)


def test_by_source_and_verl_metric_names():
    assert reported_ks(8) == [1, 2, 4, 8] and reported_ks(6) == [1, 2, 4, 6] and reported_ks(1) == [1]
    sources = ["aime"] * 8 + ["gsm"] * 4
    problems = ["a"] * 4 + ["b"] * 4 + ["c"] * 4
    acc = [1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1.0, 0]
    by_source = pass_at_k_by_source(sources, problems, [a >= 1 for a in acc])
    assert by_source["aime"][1] == pytest.approx((0.25 + 0) / 2)
    assert by_source["aime"][4] == pytest.approx(0.5) and by_source["gsm"][4] == 1.0
    assert by_source["gsm"][2] == pytest.approx(1 - math.comb(1, 2) / math.comb(4, 2))
    metrics = validation_pass_at_k(sources, problems, {"acc": acc})
    assert metrics["val-aux/aime/acc/pass@4"] == pytest.approx(0.5) and "val-aux/gsm/acc/pass@2" in metrics
    assert validation_pass_at_k(sources, problems, {"reward": acc}) == {}
