"""The tiny judge's training data: surface forms, what it learns to write, held-apart pairs, and a
template in the smoke tokenizer's characters that the product's loader accepts."""

from __future__ import annotations

import random

import pytest

from benchmarks.model_rewards.tiny_judge import (
    _pairs,
    _value,
    load_templates_from_dict,
    make_pair,
    prompt,
    reply,
    surface,
    words,
)


@pytest.mark.parametrize(
    "n, text",
    [(0, "zero"), (7, "seven"), (15, "fifteen"), (40, "forty"), (146, "one hundred forty six"), (100, "one hundred")],
)
def test_words(n, text):
    assert words(n) == text and _value(text) == n


def test_every_surface_form_reads_back_as_its_number():
    rng = random.Random(0)
    for n in range(199):
        for form in ("digits", "words", "expression"):
            assert _value(surface(n, form, rng)) == n


def test_the_reply_reasons_then_gives_the_verdict():
    rng = random.Random(1)
    for _ in range(200):
        pair = make_pair(rng)
        text = reply(pair)
        assert text.endswith("<verdict>yes</verdict>" if pair.equal else "<verdict>no</verdict>")
        value, _, reference = text.split(" <verdict>")[0].partition(" vs ")
        assert (int(value) == int(reference)) == pair.equal and int(reference) == pair.reference


def test_held_apart_pairs_are_distinct_and_the_prompt_is_in_the_smoke_vocabulary():
    from reasonrl.smoke.tokenizer import build_tokenizer

    held = _pairs(300, random.Random(2))
    assert len({(p.reference, p.answer) for p in held}) == 300
    tokenizer = build_tokenizer()
    text = prompt(tokenizer, held[0], "0123456789ab")
    assert tokenizer.unk_token_id not in tokenizer(text)["input_ids"]
    assert "smoke_judge" in load_templates_from_dict()


def test_free_form_references_are_shown_as_written_and_reasoned_about_in_digits():
    from reasonrl.smoke.tokenizer import build_tokenizer

    rng = random.Random(3)
    pairs = [make_pair(rng, ("digits", "words")) for _ in range(200)]
    worded = [p for p in pairs if not p.shown_reference.isdigit()]
    assert 60 < len(worded) < 140, "about half the references in words"
    for pair in worded[:20]:
        assert _value(pair.shown_reference) == pair.reference
        assert reply(pair).split(" vs ")[1].startswith(f"{pair.reference} "), "the reference in digits"
        assert pair.shown_reference in prompt(build_tokenizer(), pair, "t")


def test_science_rows_have_references_math_verify_cannot_read_so_the_judge_decides():
    import pandas as pd

    from benchmarks.model_rewards.tiny_judge import SCIENCE, science_rows
    from reasonrl.api import math_reward

    frame = pd.DataFrame(
        {
            "data_source": ["reasonrl/smoke"] * 4,
            "reward_model": [{"style": "rule", "ground_truth": str(n)} for n in (46, 7, 120, 99)],
        }
    )
    rows = science_rows(frame)
    assert list(rows["data_source"]) == [SCIENCE, "reasonrl/smoke", SCIENCE, "reasonrl/smoke"]
    assert frame["data_source"].iloc[0] == "reasonrl/smoke", "the input frame is left as it was"
    references = [row["ground_truth"] for row in rows["reward_model"]]
    assert references == ["forty six", "7", "one hundred twenty", "99"]
    right = [math_reward(f"\\boxed{{{n}}}", ref) for n, ref in zip((46, 7, 120, 99), references)]
    assert right == [0.0, 1.0, 0.0, 1.0], "Math-Verify reads digit references only: the judge decides the rest"
