"""Discriminative reward model: a score head's value for the whole conversation (LongCat §3.4.3,
the reward of its general-RL stage), from verl's reward-model server.

    r(x, y) = s_φ(chat(x, y))          (raw score, verl's choice; σ(s_φ) with ``rm_activation``)
            = timeout_score            when the server is late or fails (counted: rm_timeout / rm_error)

verl serves a sequence-classification model (``reward.reward_model``, vLLM's pooling runner) and
scores with it itself when no custom reward function is set — for every row of the batch. This
asks the same server's ``/classify`` endpoint the same way (the conversation through the reward
model's chat template, its last-token score), so one run can score its general rows with the model
and keep rules for the rest (``rm_domains``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any


class RewardModelError(RuntimeError):
    """The server refused the request (HTTP 4xx: e.g. the served model has no score head): a
    configuration error, raised instead of scoring every response ``timeout_score``."""


@dataclass(frozen=True)
class Scored:
    score: float
    source: str  # "scored" | "timeout" | "error"


def conversation(tokenizer: Any, question: str, response: str) -> str:
    """(user question, assistant response) through the reward model's chat template, without a
    leading BOS the server would add again (as verl's own reward-model path does)."""
    messages = [{"role": "user", "content": question}, {"role": "assistant", "content": response}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=False, tokenize=False)
    bos = getattr(tokenizer, "bos_token", None)
    return text[len(bos) :] if bos and text.startswith(bos) else text


class ScoreReward:
    """Asks ``{url}/classify`` for one conversation's score. A late or failing server is counted
    and scored ``timeout_score``; a refused request (4xx) raises :class:`RewardModelError`.

    Example:
        >>> reward = ScoreReward("127.0.0.1:8000", "/models/rm", tokenizer)   # doctest: +SKIP
        >>> (await reward.score("12+34=", "46")).score                         # doctest: +SKIP
        3.1
    """

    def __init__(
        self,
        url: str,
        model: str,
        tokenizer: Any,
        activation: bool = False,
        timeout_s: float = 120.0,
        timeout_score: float = 0.0,
        max_concurrency: int = 32,
    ):
        self.url = (url if url.startswith(("http://", "https://")) else f"http://{url}").rstrip("/")
        self.model, self.tokenizer, self.activation = model, tokenizer, activation
        self.timeout_s, self.timeout_score = timeout_s, timeout_score
        self._slots = asyncio.Semaphore(max_concurrency)

    async def _classify(self, text: str) -> float:
        import aiohttp

        request = {"model": self.model, "input": text, "use_activation": self.activation}
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{self.url}/classify", json=request) as response:
                if 400 <= response.status < 500:
                    raise RewardModelError(
                        f"reasonrl.model_rewards: the reward model at {self.url}/classify refused the request "
                        f"(HTTP {response.status}; is reward.reward_model.model_path a sequence-classification "
                        f"model?): {(await response.text())[:300]}"
                    )
                if response.status != 200:
                    raise RuntimeError(f"reward model answered HTTP {response.status}: {(await response.text())[:300]}")
                body = await response.json()
        return float(body["data"][-1]["probs"][-1])

    async def score(self, question: str, response: str) -> Scored:
        text = conversation(self.tokenizer, question, response)
        async with self._slots:
            try:
                return Scored(await asyncio.wait_for(self._classify(text), self.timeout_s), "scored")
            except asyncio.TimeoutError:
                return Scored(self.timeout_score, "timeout")
            except RewardModelError:
                raise
            except Exception:  # noqa: BLE001 - a failed server is counted, the step goes on
                return Scored(self.timeout_score, "error")
