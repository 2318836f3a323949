"""N-gram decontamination against evaluation sets (MiMo: 16-gram).

A training question is contaminated when it shares any word n-gram with an evaluation question
(n = 16 by default). An evaluation question shorter than n words counts whole: a training
question containing all of it, in order, is contaminated too (otherwise a short AIME problem
could never match).
"""

from __future__ import annotations

from typing import Iterable

from reasonrl.plugins.curation.stage import Drop, Row, Stage
from reasonrl.plugins.curation.text import ngrams, words


class Decontaminate(Stage):
    """Drops rows whose question shares a word ``n``-gram with any of ``eval_questions``."""

    name = "decontaminate"

    def __init__(self, eval_questions: Iterable[str], n: int = 16, sources: tuple[str, ...] = ()):
        if n < 1:
            raise ValueError(f"decontaminate.n = {n}: must be >= 1")
        self.n, self.sources = n, tuple(sources)
        self._grams: dict[int, set[tuple[str, ...]]] = {}  # gram length -> grams (short questions whole)
        count = 0
        for question in eval_questions:
            tokens = words(question)
            if tokens:
                size = min(self.n, len(tokens))
                self._grams.setdefault(size, set()).update(ngrams(tokens, size))
                count += 1
        self.eval_questions = count

    def settings(self) -> dict:
        return {"n": self.n, "sources": list(self.sources), "eval_questions": self.eval_questions}

    def process(self, row: Row) -> Row | Drop:
        tokens = words(row["question"])
        for size, grams in self._grams.items():
            hit = next((gram for gram in ngrams(tokens, size) if gram in grams), None)
            if hit is not None:
                return Drop("contaminated", " ".join(hit))
        return row
