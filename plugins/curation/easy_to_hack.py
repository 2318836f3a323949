"""Kimi k1.5 §2.1: drop easy-to-hack prompts. A model answers each question with no chain of
thought, ``tries`` times; if any answer is right (the math reward: Math-Verify against the
reference), the question can be guessed and rewards guessing, so it is dropped.

The model is any ``answer(prompts, n) -> [[n texts] per prompt]``; ``openai_answerer`` asks an
OpenAI-compatible server (``vllm serve``, the generation engine reasonrl uses) for n samples.
"""

from __future__ import annotations

from typing import Callable

from reasonrl.plugins.curation.stage import CurationError, Drop, Row, Stage

Answerer = Callable[[list[str], int], list[list[str]]]

#: Kimi asks for the answer without reasoning; {question} is the row's question
DIRECT_ANSWER = "{question}\nAnswer directly, without any reasoning: give only the final answer in \\boxed{{}}."


class EasyToHack(Stage):
    name = "easy_to_hack"

    def __init__(self, answer: Answerer, tries: int = 8, prompt_template: str = DIRECT_ANSWER, model: str = ""):
        if tries < 1:
            raise ValueError(f"easy_to_hack.tries = {tries}: must be >= 1")
        if "{question}" not in prompt_template:
            raise ValueError("easy_to_hack.prompt_template must contain {question}")
        self.answer, self.tries, self.prompt_template, self.model = answer, tries, prompt_template, model

    def settings(self) -> dict:
        return {"tries": self.tries, "prompt_template": self.prompt_template, "model": self.model}

    def process_batch(self, rows: list[Row]) -> list[Row | Drop]:
        from reasonrl.api import math_reward

        asked = [row for row in rows if not row.get("tests")]  # a code problem is not guessed by its answer
        prompts = [self.prompt_template.format(question=row["question"]) for row in asked]
        answers = self.answer(prompts, self.tries) if asked else []
        if len(answers) != len(asked):
            raise CurationError(f"easy_to_hack: the model answered {len(answers)} of {len(asked)} prompts")
        tries_of = {id(row): tries for row, tries in zip(asked, answers)}
        out: list[Row | Drop] = []
        for row in rows:
            tries = tries_of.get(id(row), [])
            hit = next((i for i, text in enumerate(tries) if math_reward(text, str(row["answer"])) >= 1.0), None)
            out.append(row if hit is None else Drop("easy_to_hack", f"guessed at try {hit + 1}: {tries[hit][:60]!r}"))
        return out


def openai_answerer(url: str, model: str, max_tokens: int = 32, temperature: float = 1.0, timeout_s: float = 120.0):
    """``answer(prompts, n)`` through an OpenAI-compatible chat endpoint (``reasonrl.openai_chat``)."""

    def answer(prompts: list[str], n: int) -> list[list[str]]:
        from concurrent.futures import ThreadPoolExecutor

        from reasonrl.openai_chat import ModelServerError, chat_samples

        def one(prompt: str) -> list[str]:
            messages = [{"role": "user", "content": prompt}]
            try:
                return chat_samples(url, model, messages, n, temperature, max_tokens, timeout_s=timeout_s)
            except ModelServerError as error:
                raise CurationError(f"easy_to_hack: {error}") from error

        with ThreadPoolExecutor(max_workers=16) as pool:
            return list(pool.map(one, prompts))

    return answer
