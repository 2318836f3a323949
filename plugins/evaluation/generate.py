"""n generations per prompt from an OpenAI-compatible chat endpoint (``vllm serve``: vLLM is the
project's generation engine; ``reasonrl eval --model`` starts one), through ``reasonrl.openai_chat``."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from reasonrl.openai_chat import chat_samples


@dataclass(frozen=True)
class Sampling:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 1024
    seed: int | None = 0


def generate(url: str, model: str, prompts: list[str], sampling: Sampling, system: str = "", workers: int = 8):
    """``[[n texts] per prompt]``; ``ModelServerError`` when the server refuses or fails."""

    def one(prompt: str) -> list[str]:
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        return chat_samples(
            url, model, messages, sampling.n, sampling.temperature, sampling.max_tokens, sampling.top_p, sampling.seed
        )

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, prompts))
