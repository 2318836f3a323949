"""Shortest rejection sampling and Kimi's DPO pairs on hand-worked examples."""

from __future__ import annotations

import pytest

from reasonrl.plugins.long2short.selection import Sample, check_samples_per_question, dpo_negatives, shortest_correct


def samples(*spec: tuple[int, bool]) -> list[Sample]:
    return [Sample(f"r{i}", length, correct) for i, (length, correct) in enumerate(spec)]


def test_the_shortest_correct_response_is_kept_ties_to_the_earlier_sample():
    group = samples((9, True), (4, False), (6, True), (6, True), (12, True))
    assert shortest_correct(group) == 2  # length 6, the earlier of the two
    assert shortest_correct(samples((5, False), (3, False))) is None  # no correct sample
    assert shortest_correct(samples((7, True), (7, True), (7, True))) == 0  # all correct, all one length


def test_dpo_negatives_are_wrong_longer_and_correct_at_least_one_and_a_half_times_longer():
    group = samples((10, True), (9, False), (10, False), (11, False), (14, True), (15, True), (30, True), (4, False))
    positive, negatives = dpo_negatives(group)
    assert positive == 0
    # wrong: 9 (shorter) and 10 (equal) are not longer, 11 is; 4 is shorter. correct: 14 < 1.5 × 10, 15 and 30 are ≥ 15
    assert negatives == [3, 5, 6]
    assert dpo_negatives(samples((5, False), (8, False))) == (None, [])  # no correct sample: no pair
    assert dpo_negatives(samples((6, True), (8, True), (7, True))) == (0, [])  # all correct, none 1.5× longer
    assert dpo_negatives(samples((6, True), (9, True)), ratio=1.5) == (0, [1])  # exactly 1.5×: a negative


def test_fewer_than_two_samples_per_question_is_refused_naming_n():
    check_samples_per_question(2)
    with pytest.raises(ValueError, match="^n: 1"):
        check_samples_per_question(1)


def test_build_writes_the_shortest_correct_for_sft_and_kimis_pairs_for_dpo():
    from reasonrl.plugins.long2short.rejection import build

    rows = [
        {"prompt": [{"role": "user", "content": "1+1="}], "data_source": "a", "extra_info": {"index": 0}},
        {"prompt": [{"role": "user", "content": "2+2="}], "data_source": "a", "extra_info": {"index": 1}},
    ]
    scored = [
        [
            Sample("2 because", 3, True),
            Sample("2", 1, True),
            Sample("3 is it", 4, False),
            Sample("2, as 1 and 1 make 2", 8, True),
        ],
        [Sample("5", 1, False), Sample("3", 1, False)],  # no correct sample: no SFT row, no pair
    ]
    sft, dpo, stats = build(rows, scored)
    assert sft == [
        {
            "messages": [{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "2"}],
            "data_source": "a",
            "extra_info": {"index": 0},
        }
    ]
    # positive "2" (1 token): wrong and longer "3 is it"; correct ≥ 1.5 tokens: "2 because", "2, as ..."
    assert [(p["chosen"][0]["content"], p["rejected"][0]["content"]) for p in dpo] == [
        ("2", "2 because"),
        ("2", "3 is it"),
        ("2", "2, as 1 and 1 make 2"),
    ]
    assert all(p["prompt"] == rows[0]["prompt"] for p in dpo)
    assert stats["questions_with_a_correct_sample"] == 1 and stats["mean_length_kept"] == 1.0
    assert stats["mean_length_all"] == pytest.approx(18 / 6) and stats["accuracy"] == pytest.approx(3 / 6)
