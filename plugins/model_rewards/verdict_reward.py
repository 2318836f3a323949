"""Verdict rewards: a judge model decides whether a response's final answer matches the reference
(LongCat §3.3 GenRM, Llama-Nemotron §5.1 LLM judge, Kimi k1.5 §2.3.5 chain-of-thought RM).

    r(x, y) = 1                      if rule_first and MathVerify(final(y), y*) = 1
            = 0                      if final(y) is empty (the judge is not asked)
            = cache[x, y*, final(y)] if that (template, x, y*, final(y)) was judged before
            = verdict(J(T(x, y*, final(y))))   otherwise, ∈ {0, 1}
            = unparsed_score / timeout_score  when the judge's text has no verdict / it is late

where T is the template (the answer fenced, see ``templates.py``) and J the judge model. Rules
first, the model only where rules say "not equal" (the reports combine them so: rules are exact
where they parse, the judge catches the equivalences they miss). The judge is any async
``ask(messages) -> text``: verl's reward-model server (``openai_chat`` on its router) in training.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Awaitable, Callable

from reasonrl.plugins.model_rewards.cache import VerdictCache, verdict_key
from reasonrl.plugins.model_rewards.templates import VerdictTemplate, final_answer
from reasonrl.plugins.model_rewards.verdict import parse_verdict

LOG = logging.getLogger("reasonrl.model_rewards")

#: chat messages → the judge's text
Ask = Callable[[list[dict]], Awaitable[str]]
#: (response, reference) → 0 / 1 by rule (Math-Verify); blocking, run in a thread
Rule = Callable[[str, str], float]


@dataclass(frozen=True)
class VerdictSettings:
    """How one verdict reward asks and scores (the knobs of ``reasonrl.model_rewards``)."""

    rule_first: bool = True
    unparsed_score: float = 0.0
    timeout_score: float = 0.0
    timeout_s: float = 120.0
    max_concurrency: int = 32
    max_answer_chars: int = 2000
    cache_size: int = 10_000


@dataclass(frozen=True)
class Verdict:
    """A scored response: ``source`` says who decided (rule, model, cache, unparsed, timeout, error)."""

    score: float
    source: str
    judge_text: str = ""


class VerdictReward:
    """Scores (question, reference, response) with rules first, then the judge; counts everything.

    Example:
        >>> reward = VerdictReward(template, ask=my_async_judge, rule=math_reward)  # doctest: +SKIP
        >>> (await reward.score("2+2?", "4", "It is \\\\boxed{four}")).score        # doctest: +SKIP
        1.0
    """

    def __init__(
        self, template: VerdictTemplate, ask: Ask, settings: VerdictSettings | None = None, rule: Rule | None = None
    ):
        self.template = template
        self.ask = ask
        self.settings = settings or VerdictSettings()
        self.rule = rule
        self.cache = VerdictCache(self.settings.cache_size)
        self.counts: Counter[str] = Counter()
        self._slots: asyncio.Semaphore | None = None
        self._in_flight: dict[str, asyncio.Future] = {}

    async def score(self, question: str, reference: str, response: str) -> Verdict:
        verdict = await self._score(str(question), str(reference), str(response))
        self.counts[verdict.source] += 1
        if verdict.source in ("model", "cache"):
            self.counts["verdict_yes" if verdict.score else "verdict_no"] += 1
        return verdict

    async def score_many(self, items: list[tuple[str, str, str]]) -> list[Verdict]:
        """Scores for (question, reference, response) triples, at most ``max_concurrency`` asks at once
        (the serving engine batches the concurrent requests)."""
        return list(await asyncio.gather(*(self.score(*item) for item in items)))

    def metrics(self) -> dict[str, float]:
        """Counts so far: decided by rule / empty answer / model / cache, unparsed, timeouts, errors, yes / no."""
        keys = ("rule", "empty", "model", "cache", "unparsed", "timeout", "error", "verdict_yes", "verdict_no")
        return {key: float(self.counts[key]) for key in keys}

    async def _score(self, question: str, reference: str, response: str) -> Verdict:
        if self.settings.rule_first and self.rule is not None:
            if await asyncio.to_thread(self.rule, response, reference) >= 1.0:
                return Verdict(1.0, "rule")
        answer = final_answer(response, self.settings.max_answer_chars)
        if not answer.strip():
            # nothing to judge (cut after </think>): the tiny CPU judge said yes to such answers, and
            # a judge that can be asked about nothing is a reward a policy can learn to farm
            return Verdict(0.0, "empty")
        key = verdict_key(self.template.name, question, reference, answer)
        cached = self.cache.get(key)
        if cached is not None:
            return Verdict(cached, "cache")
        if self.settings.cache_size <= 0:  # cache off: every response asks
            return await self._ask(key, question, reference, answer)
        asked = self._in_flight.get(key)
        if asked is None:  # the same answer asked concurrently (a group's repeats): one request
            asked = asyncio.ensure_future(self._ask(key, question, reference, answer))
            self._in_flight[key] = asked
            asked.add_done_callback(lambda _: self._in_flight.pop(key, None))
            return await asked
        shared = await asyncio.shield(asked)
        return Verdict(shared.score, "cache", shared.judge_text) if shared.source == "model" else shared

    async def _ask(self, key: str, question: str, reference: str, answer: str) -> Verdict:
        messages = self.template.messages(question, reference, answer)
        try:
            async with self._concurrency():
                text = await asyncio.wait_for(self.ask(messages), self.settings.timeout_s)
        except asyncio.TimeoutError:
            LOG.warning("judge past %.0f s: scored %s", self.settings.timeout_s, self.settings.timeout_score)
            return Verdict(self.settings.timeout_score, "timeout")
        except Exception as error:  # the judge's server failing is counted, never the reward loop's crash
            LOG.warning(
                "judge request failed (%s: %s): scored %s", type(error).__name__, error, self.settings.timeout_score
            )
            return Verdict(self.settings.timeout_score, "error", str(error)[:500])
        parsed = parse_verdict(text, self.template)
        if parsed is None:
            return Verdict(self.settings.unparsed_score, "unparsed", text if isinstance(text, str) else repr(text))
        self.cache.put(key, parsed)
        return Verdict(parsed, "model", text)

    def _concurrency(self) -> asyncio.Semaphore:
        # created on first use: inside the event loop that runs the requests
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.settings.max_concurrency)
        return self._slots
