"""Question-type, verifiable-reference, difficulty and easy-to-hack filters on hand-made rows."""

from __future__ import annotations

import pytest

from reasonrl.plugins.curation.easy_to_hack import EasyToHack
from reasonrl.plugins.curation.filters import DifficultyFilter, QuestionTypeFilter, VerifiableAnswer, question_type
from reasonrl.plugins.curation.stage import CurationError, Drop


def row(question: str, answer: str = "1", id_: int = 0, **more) -> dict:
    return {"id": str(id_), "question": question, "answer": answer, **more}


@pytest.mark.parametrize(
    "question, answer, kind",
    [
        ("Which is prime? (A) 4 (B) 6 (C) 7 (D) 9", "C", "multiple_choice"),
        ("Which is prime?\nA. 4\nB. 6\nC. 7\nD. 9", "7", "multiple_choice"),
        ("Pick one: (A) 4 or (B) 7", "(B)", "multiple_choice"),
        ("True or false: every prime is odd.", "False", "true_false"),
        ("Is 91 prime?", "No", "true_false"),
        ("Prove that there are infinitely many primes.", "", "proof"),
        ("Show that n^2 + n is even for every integer n.", "", "proof"),
        ("Find the 10th prime.", "29", "open"),
        ("A) Compute 3+4.", "7", "open"),  # a lone part label is not a choice list
        ("How many primes are below 20? Answer: the count (a number).", "8", "open"),
    ],
)
def test_question_types(question, answer, kind):
    assert question_type(question, answer) == kind


def test_the_type_filter_drops_what_it_is_told_to():
    stage = QuestionTypeFilter(drop=("proof",))
    assert stage.process(row("Prove that 2 is prime.")) == Drop("proof")
    assert stage.process(row("True or false: 2 is prime.", "true"))["id"] == "0"
    with pytest.raises(ValueError, match="unknown type"):
        QuestionTypeFilter(drop=("essay",))


def test_unverifiable_references_are_dropped():
    stage = VerifiableAnswer()
    for answer in ("42", "\\frac{1}{2}", "x^2 + 1", "3\\sqrt{2}", "\\pi/4"):
        assert stage.process(row("q", answer))["answer"] == answer
    assert stage.process(row("q", "see the proof above")) == Drop("prose_reference", "see")
    assert stage.process(row("q", "forty six")) == Drop("prose_reference", "forty")
    assert stage.process(row("q", "\\frac{1}{")).reason == "unverifiable_reference"
    assert stage.process(row("q", "")) == Drop("no_reference")
    code = row("q", "", tests={"inputs": ["1"], "outputs": ["1"]})
    assert stage.process(code) == code, "a code problem's reference is its tests"


def test_difficulty_keeps_the_band_and_names_a_missing_pass_rate():
    nemotron = DifficultyFilter(max_pass_rate=0.75, max_inclusive=False)
    assert nemotron.process(row("q", pass_rate=0.625))["id"] == "0"
    assert nemotron.process(row("q", pass_rate=0.75)).reason == "too_easy"
    mimo = DifficultyFilter(min_pass_rate=0.0, max_pass_rate=0.9)
    assert mimo.process(row("q", pass_rate=0.9))["id"] == "0"
    assert mimo.process(row("q", pass_rate=15 / 16)).reason == "too_easy"
    assert DifficultyFilter(min_pass_rate=0.1).process(row("q", pass_rate=0.0)).reason == "too_hard"
    with pytest.raises(CurationError, match="--field pass_rate=COLUMN"):
        mimo.process(row("q"))
    with pytest.raises(ValueError):
        DifficultyFilter(min_pass_rate=0.8, max_pass_rate=0.2)


class ScriptedModel:
    """Answers without reasoning as written here (the stage's logic; a real model answers in
    integration_tests/curation): question → the n answers it gives."""

    def __init__(self, answers: dict[str, list[str]]):
        self.answers, self.asked = answers, []

    def __call__(self, prompts: list[str], n: int) -> list[list[str]]:
        self.asked.append((prompts, n))
        return [next(v for k, v in self.answers.items() if k in p)[:n] for p in prompts]


def test_a_question_guessed_in_any_of_n_tries_is_dropped():
    model = ScriptedModel(
        {
            "guessable": ["7", "9", "\\boxed{12}", "12"],  # right at try 3
            "hard": ["5", "6", "8", "10"],
            "late": ["1", "2", "3", "4", "12"],  # right only at try 5
        }
    )
    stage = EasyToHack(model, tries=4)
    out = stage.process_batch([row("guessable one", "12"), row("hard one", "12", 1), row("late one", "12", 2)])
    assert isinstance(out[0], Drop) and out[0].reason == "easy_to_hack" and "try 3" in out[0].detail
    assert out[1]["id"] == "1" and out[2]["id"] == "2", "right only after the 4 tries: kept"
    ((prompts, n),) = model.asked
    assert n == 4 and all("without any reasoning" in p for p in prompts)
