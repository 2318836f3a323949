"""The judge as an OpenAI-compatible chat endpoint: verl's reward-model router
(``reward.reward_model``: vLLM servers behind ``http://{reward_router_address}``) in training, or
any ``vllm serve`` of the judge. One POST per verdict; the engine batches concurrent requests."""

from __future__ import annotations

from reasonrl.plugins.model_rewards.verdict_reward import Ask


def openai_chat(base_url: str, model: str, max_tokens: int = 1024, temperature: float = 0.0) -> Ask:
    """An ``ask(messages) -> text`` posting to ``{base_url}/v1/chat/completions``.

    ``model`` is the served model's name (verl serves the reward model under its
    ``reward.reward_model.model_path``); ``base_url`` may omit ``http://``.
    """
    url = (base_url if base_url.startswith(("http://", "https://")) else f"http://{base_url}").rstrip("/")

    async def ask(messages: list[dict]) -> str:
        import aiohttp

        request = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature}
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{url}/v1/chat/completions", json=request) as response:
                if response.status != 200:
                    raise RuntimeError(f"judge server answered HTTP {response.status}: {(await response.text())[:300]}")
                body = await response.json()
        return body["choices"][0]["message"]["content"] or ""

    return ask
