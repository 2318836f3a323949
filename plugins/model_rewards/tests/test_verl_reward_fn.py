"""verl's custom reward function of this plugin: constraint rows, declined rows, and verdict rows
asked over HTTP (a small OpenAI-style chat server in the test's event loop: the judge is it, the
HTTP path and the settings from the option file's reward_kwargs are the product's)."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from reasonrl.plugins.model_rewards.verl_callback import counts
from reasonrl.plugins.model_rewards.verl_reward_fn import EXTRA_KEYS, compute_score

MODEL = "/models/judge"


async def _judge_server(requests: list):
    async def chat(request):
        body = await request.json()
        requests.append(body)
        user = body["messages"][1]["content"]
        verdict = "yes" if "forty-two" in user else "no"
        return web.json_response({"choices": [{"message": {"content": f"Considered. <verdict>{verdict}</verdict>"}}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    return runner, f"127.0.0.1:{port}"


def test_verdict_rows_ask_the_router_and_repeats_are_shared():
    async def run():
        requests = []
        runner, address = await _judge_server(requests)
        try:
            settings = {"judge_domains": ["science"]}
            rows = ["\\boxed{forty-two}"] * 3 + ["\\boxed{42}", "\\boxed{17}"]
            results = await asyncio.gather(
                *(
                    compute_score(
                        "science",
                        row,
                        "42",
                        {"question": "6*7?"},
                        reward_router_address=address,
                        model_rewards=settings,
                        judge_model_path=MODEL,
                    )
                    for row in rows
                )
            )
            declined = await compute_score("math", "\\boxed{1}", "1", {}, model_rewards=settings)
            return requests, results, declined
        finally:
            await runner.cleanup()

    requests, results, declined = asyncio.run(run())
    assert [r["score"] for r in results] == [1.0, 1.0, 1.0, 1.0, 0.0]
    assert [r["judge_rule"] for r in results] == [0, 0, 0, 1, 0], "Math-Verify decided 42 = 42"
    assert len(requests) == 2 and {r["model"] for r in requests} == {MODEL}, "one request per distinct answer"
    assert declined["score"] is None and set(declined) == {"score", *EXTRA_KEYS}
    assert all(set(r) == {"score", *EXTRA_KEYS} for r in results), "one key set for every response"
    step = counts(results + [declined])
    assert (step["model_rewards/judge_model"], step["model_rewards/judge_cache"], step["model_rewards/judge_rule"]) == (
        2,
        2,
        1,
    )


def test_constraint_rows_are_scored_by_their_checks():
    info = {"instruction_id_list": ["keywords:existence"], "kwargs": [{"keywords": ["river"]}]}
    kept = asyncio.run(compute_score("ifeval", "the river", None, info, model_rewards={"judge_domains": []}))
    missed = asyncio.run(compute_score("ifeval", "a lake", None, info, model_rewards={"judge_domains": []}))
    assert (kept["score"], kept["constraints_followed"], missed["score"], missed["constraints_checked"]) == (
        1.0,
        1.0,
        0.0,
        1.0,
    )


def test_no_judge_configured_is_named():
    with pytest.raises(ValueError, match="no judge to ask: enable verl's reward model"):
        asyncio.run(compute_score("science", "x", "y", {}, model_rewards={}))


def test_bad_settings_are_named_with_their_key():
    from reasonrl.config import ConfigError

    with pytest.raises(ConfigError, match="reasonrl.model_rewards.template.*'genrm' is not a template"):
        asyncio.run(compute_score("science", "x", "y", {}, model_rewards={"template": "genrm"}))
