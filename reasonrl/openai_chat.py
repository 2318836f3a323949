"""Sampled chat answers from an OpenAI-compatible server (``vllm serve``, the engine reasonrl
generates with): one blocking request for n samples. Shared by the commands that ask a model."""

from __future__ import annotations

import json
import urllib.error
import urllib.request


class ModelServerError(RuntimeError):
    """The model server refused a request (its answer included) or could not be reached."""


def chat_samples(
    url: str,
    model: str,
    messages: list[dict],
    n: int,
    temperature: float,
    max_tokens: int,
    top_p: float = 1.0,
    seed: int | None = None,
    timeout_s: float = 3600.0,
) -> list[str]:
    """``n`` answers to ``messages`` from ``{url}/v1/chat/completions``. At temperature 0 one greedy
    answer stands for the n (servers refuse n > 1 without sampling)."""
    greedy = temperature == 0
    body = {
        "model": model,
        "messages": messages,
        "n": 1 if greedy else n,
        "temperature": temperature,
        "top_p": top_p,
        "max_tokens": max_tokens,
        **({"seed": seed} if seed is not None else {}),
    }
    request = urllib.request.Request(
        url.rstrip("/") + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            choices = json.loads(response.read())["choices"]
    except urllib.error.HTTPError as error:
        said = error.read().decode(errors="replace")[:500]
        raise ModelServerError(f"the model server at {url} refused: {error}: {said}") from error
    except OSError as error:
        raise ModelServerError(f"the model server at {url} failed: {error}") from error
    texts = [choice["message"]["content"] or "" for choice in sorted(choices, key=lambda c: c["index"])]
    return texts * n if greedy else texts
