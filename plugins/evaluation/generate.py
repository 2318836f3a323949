"""n generations per prompt from an OpenAI-compatible chat endpoint (``vllm serve``: vLLM is the
project's generation engine; ``reasonrl eval --model`` starts one)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass


class GenerationError(RuntimeError):
    """The model server refused or failed (its answer included)."""


@dataclass(frozen=True)
class Sampling:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 1024
    seed: int | None = 0


def generate(url: str, model: str, prompts: list[str], sampling: Sampling, system: str = "", workers: int = 8):
    """``[[n texts] per prompt]``. At temperature 0 one greedy answer stands for the n."""

    def one(prompt: str) -> list[str]:
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        greedy = sampling.temperature == 0
        body = {
            "model": model,
            "messages": messages,
            "n": 1 if greedy else sampling.n,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens,
            **({"seed": sampling.seed} if sampling.seed is not None else {}),
        }
        request = urllib.request.Request(
            url.rstrip("/") + "/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=3600) as response:
                choices = json.loads(response.read())["choices"]
        except urllib.error.HTTPError as error:
            raise GenerationError(f"{url} refused: {error}: {error.read().decode(errors='replace')[:500]}") from error
        except OSError as error:
            raise GenerationError(f"{url} failed: {error}") from error
        texts = [c["message"]["content"] or "" for c in sorted(choices, key=lambda c: c["index"])]
        return texts * sampling.n if greedy else texts

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, prompts))
