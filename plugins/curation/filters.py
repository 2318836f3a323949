"""Row filters of the reports' RL data curation.

- Question types (MiMo §3.2, Kimi k1.5 §2.1): multiple-choice, true/false and proof questions are
  dropped — a guess or a yes/no scores as often as reasoning does, and a proof has no answer a
  rule can check.
- Verifiable answers: the reference must be gradable by the reward the RL stage uses
  (``reasonrl.api.math_reward``: Math-Verify) — the reference, given as an answer, scores 1
  against itself; otherwise every rollout of the problem would score 0. Prose is refused first
  (a word of three or more letters outside LaTeX commands): Math-Verify reads "forty six" as the
  product of its letters, so a prose reference "verifies" only against the same words.
- Difficulty: keep rows whose pre-computed pass rate lies in [min_pass_rate, max_pass_rate]
  (Llama-Nemotron §5.1 drops pass rate ≥ 0.75 of 8 samples; MiMo §3.2 drops > 0.9 of 16 rollouts);
  ``reasonrl sampling pass-rates`` writes the column from rollout logs.
"""

from __future__ import annotations

import re

from reasonrl.plugins.curation.stage import CurationError, Drop, Row, Stage

_OPTION = re.compile(r"(?:^|\s|\()\(?([A-E])[\).:]\s", re.M)
_TRUE_FALSE_ANSWERS = {"true", "false", "yes", "no", "t", "f", "correct", "incorrect"}
_TRUE_FALSE_QUESTION = re.compile(r"\btrue or false\b|\bis it true that\b|\bdetermine whether .* is true\b", re.I)
_PROOF = re.compile(r"\b(prove|show that|demonstrate that|give a proof|proof that)\b", re.I)
_LETTER_ANSWER = re.compile(r"^\(?[A-E]\)?\.?$")
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_PROSE_WORD = re.compile(r"[A-Za-z]{3,}")


def question_type(question: str, answer: str) -> str:
    """``multiple_choice``, ``true_false``, ``proof`` or ``open`` (the only kind RL keeps)."""
    letters = {match.group(1) for match in _OPTION.finditer(question)}
    if len(letters) >= 3 or ({"A", "B"} <= letters and _LETTER_ANSWER.match(answer.strip())):
        return "multiple_choice"
    if answer.strip().lower().strip(".$\\{}() ") in _TRUE_FALSE_ANSWERS or _TRUE_FALSE_QUESTION.search(question):
        return "true_false"
    if _PROOF.search(question):
        return "proof"
    return "open"


class QuestionTypeFilter(Stage):
    name = "question_types"

    def __init__(self, drop: tuple[str, ...] = ("multiple_choice", "true_false", "proof")):
        unknown = set(drop) - {"multiple_choice", "true_false", "proof"}
        if unknown:
            raise ValueError(f"question_types.drop: unknown type(s) {sorted(unknown)}")
        self.drop = tuple(drop)

    def settings(self) -> dict:
        return {"drop": list(self.drop)}

    def process(self, row: Row) -> Row | Drop:
        kind = question_type(row["question"], str(row.get("answer") or ""))
        return Drop(kind) if kind in self.drop else row


class VerifiableAnswer(Stage):
    """Keeps rows whose reference the math reward grades: it scores 1 as its own answer."""

    name = "verifiable_answer"

    def process(self, row: Row) -> Row | Drop:
        from reasonrl.api import math_reward

        if row.get("tests"):
            return row  # a code problem: its tests are its reference (stage code_tests)
        answer = str(row.get("answer") or "").strip()
        if not answer:
            return Drop("no_reference")
        word = _PROSE_WORD.search(_LATEX_COMMAND.sub(" ", answer))
        if word:
            return Drop("prose_reference", word.group(0))
        if math_reward(f"\\boxed{{{answer}}}", answer) < 1.0:
            return Drop("unverifiable_reference", answer[:80])
        return row


class DifficultyFilter(Stage):
    """Keeps rows with ``min_pass_rate <= pass_rate <= max_pass_rate`` (``< max_pass_rate`` when
    ``max_inclusive`` is false: Nemotron drops 0.75 itself)."""

    name = "difficulty"

    def __init__(self, min_pass_rate: float = 0.0, max_pass_rate: float = 1.0, max_inclusive: bool = True):
        if not 0.0 <= min_pass_rate <= max_pass_rate <= 1.0:
            raise ValueError(
                f"difficulty: need 0 <= min_pass_rate ({min_pass_rate}) <= max_pass_rate ({max_pass_rate}) <= 1"
            )
        self.min_pass_rate, self.max_pass_rate, self.max_inclusive = min_pass_rate, max_pass_rate, max_inclusive

    def settings(self) -> dict:
        return {
            "min_pass_rate": self.min_pass_rate,
            "max_pass_rate": self.max_pass_rate,
            "max_inclusive": self.max_inclusive,
        }

    def process(self, row: Row) -> Row | Drop:
        rate = row.get("pass_rate")
        if rate is None:
            raise CurationError(
                f"stage difficulty: row {row['id']} has no pass rate: map its column (--field pass_rate=COLUMN; "
                "`reasonrl sampling pass-rates` writes one from rollout logs) or run without it (--skip difficulty)"
            )
        if rate < self.min_pass_rate:
            return Drop("too_hard", f"pass rate {rate:.3f}")
        if rate > self.max_pass_rate or (rate == self.max_pass_rate and not self.max_inclusive):
            return Drop("too_easy", f"pass rate {rate:.3f}")
        return row
