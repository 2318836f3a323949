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

    return await _serve("/v1/chat/completions", chat)


async def _serve(path: str, handler):
    """An HTTP server on a free local port answering POST ``path``: (runner, "host:port")."""
    app = web.Application()
    app.router.add_post(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"127.0.0.1:{site._server.sockets[0].getsockname()[1]}"


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
    with pytest.raises(ValueError, match="no model to ask: enable verl's reward model"):
        asyncio.run(compute_score("science", "x", "y", {"question": "q"}, model_rewards={}))


def test_bad_settings_are_named_with_their_key():
    from reasonrl.config import ConfigError

    with pytest.raises(ConfigError, match="reasonrl.model_rewards.template.*'genrm' is not a template"):
        asyncio.run(compute_score("science", "x", "y", {}, model_rewards={"template": "genrm"}))


class ChatTokenizer:
    """A tokenizer's chat-template surface: ``<s>`` + ``role: content`` lines (BOS as Llama's)."""

    bos_token = "<s>"

    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=False):
        return "<s>" + "".join(f"{m['role']}: {m['content']}\n" for m in messages)


async def _classifier_server(requests: list, status: int = 200):
    async def classify(request):
        body = await request.json()
        requests.append(body)
        if status != 200:
            return web.Response(status=status, text="this model does not support classify")
        return web.json_response({"data": [{"probs": [2.5 if "46" in body["input"] else -1.0]}]})

    return await _serve("/classify", classify)


def _rm_scores(status: int, rows: list[tuple[str, str, dict]]):
    async def run():
        requests = []
        runner, address = await _classifier_server(requests, status)
        try:
            settings = {"rm_domains": ["general"], "judge_domains": []}
            results = [
                await compute_score(
                    source,
                    response,
                    None,
                    info,
                    reward_router_address=address,
                    reward_model_tokenizer=ChatTokenizer(),
                    model_rewards=settings,
                    judge_model_path=MODEL,
                )
                for source, response, info in rows
            ]
            return requests, results
        finally:
            await runner.cleanup()

    return asyncio.run(run())


def test_rm_rows_get_the_reward_models_score_of_the_whole_conversation():
    rows = [("general", "46", {"question": "12+34="}), ("general", "45", {"question": "12+34="})]
    requests, results = _rm_scores(200, rows + [("math", "46", {"question": "12+34="})])
    assert [r["score"] for r in results] == [2.5, -1.0, None], "raw scores; rows outside rm_domains declined"
    # verl's own request: the conversation through the chat template, its BOS left to the server
    assert requests[0] == {"model": MODEL, "input": "user: 12+34=\nassistant: 46\n", "use_activation": False}
    assert counts(results)["model_rewards/rm_scored"] == 2 and set(results[0]) == {"score", *EXTRA_KEYS}


def test_a_refusing_reward_model_stops_the_run_and_a_failing_one_is_counted():
    from reasonrl.plugins.model_rewards.score_reward import RewardModelError

    with pytest.raises(RewardModelError, match="sequence-classification"):
        _rm_scores(400, [("general", "46", {"question": "12+34="})])
    _requests, results = _rm_scores(503, [("general", "46", {"question": "12+34="})])
    assert (results[0]["score"], results[0]["rm_error"]) == (0.0, 1.0)


def test_a_model_scored_row_without_its_question_is_named():
    with pytest.raises(ValueError, match="'general' row has no extra_info.question .rm_domains"):
        _rm_scores(200, [("general", "46", {})])
    with pytest.raises(ValueError, match="'science' row has no extra_info.question .judged"):
        asyncio.run(
            compute_score("science", "x", "y", {"question": None}, model_rewards={"judge_url": "u", "judge_model": "m"})
        )


def test_constraint_arguments_read_from_parquet_are_plain_lists():
    import numpy as np

    info = {"instruction_id_list": np.array(["keywords:existence"]), "kwargs": [{"keywords": np.array(["a", "b"])}]}
    assert asyncio.run(compute_score("ifeval", "a b", None, info, model_rewards={"judge_domains": []}))["score"] == 1.0
    # two constraints: parquet gives the kwargs column as an array of dicts (whose truth is ambiguous),
    # with the struct's other fields as None
    info = {
        "instruction_id_list": np.array(["keywords:existence", "length_constraints:number_words"]),
        "kwargs": np.array(
            [
                {"keywords": np.array(["a"]), "num_words": None, "relation": None},
                {"keywords": None, "num_words": 3.0, "relation": "less than"},
            ]
        ),
    }
    assert asyncio.run(compute_score("ifeval", "a b", None, info, model_rewards={"judge_domains": []}))["score"] == 1.0
    assert (
        asyncio.run(compute_score("ifeval", "a b c d", None, info, model_rewards={"judge_domains": []}))["score"] == 0.0
    )


@pytest.mark.parametrize(
    "section, enabled, refused",
    [
        ({"rm_domains": ["general"], "judge_domains": []}, False, True),
        ({"judge_domains": None}, False, True),  # every row judged
        ({"rm_domains": ["general"], "judge_domains": []}, True, False),
        ({"judge_domains": []}, False, False),  # constraint rows only: no model
        ({"judge_url": "127.0.0.1:1", "judge_model": "m"}, False, False),
    ],
)
def test_a_run_that_scores_with_a_model_none_serves_is_refused_at_start(section, enabled, refused):
    from omegaconf import OmegaConf

    from reasonrl.config import ConfigError
    from reasonrl.plugins.model_rewards.config import check_run
    from reasonrl.plugins.model_rewards.verl_callback import FUNCTION

    config = OmegaConf.create(
        {
            "reward": {"custom_reward_function": {"path": FUNCTION}, "reward_model": {"enable": enabled}},
            "reasonrl": {"model_rewards": section},
            "trainer": {"v1": {"trainer_mode": "reasonrl_sync"}},
        }
    )
    if refused:
        with pytest.raises(ConfigError, match="none is served: set reward.reward_model.enable=true"):
            check_run(config)
    else:
        check_run(config)


def test_a_run_outside_reasonrls_trainer_modes_is_refused_at_start():
    """Its counters are a trainer callback: in verl's own trainer they would silently be missing."""
    from omegaconf import OmegaConf

    from reasonrl.config import ConfigError
    from reasonrl.plugins.model_rewards.config import check_run
    from reasonrl.plugins.model_rewards.verl_callback import FUNCTION

    config = OmegaConf.create(
        {"reward": {"custom_reward_function": {"path": FUNCTION}}, "trainer": {"v1": {"trainer_mode": "sync"}}}
    )
    with pytest.raises(ConfigError, match="trainer.v1.trainer_mode.*model_rewards step counters"):
        check_run(config)


def test_data_without_the_question_a_model_is_shown_is_refused_before_the_run(tmp_path):
    import pandas as pd
    from omegaconf import OmegaConf

    from reasonrl.errors import UserError
    from reasonrl.plugins.model_rewards import reasonrl_dataset_columns
    from reasonrl.plugins.model_rewards.verl_callback import FUNCTION
    from reasonrl.startup_checks import check_dataset_columns

    def data(extra_info: dict) -> str:
        path = tmp_path / f"{len(extra_info)}.parquet"
        row = {
            "data_source": "science",
            "prompt": [{"role": "user", "content": "q"}],
            "reward_model": {"ground_truth": "42"},
            "extra_info": extra_info,
        }
        pd.DataFrame([row]).to_parquet(path)
        return str(path)

    def config(files: str, judge_domains) -> object:
        return OmegaConf.create(
            {
                "data": {"train_files": files, "val_files": files, "prompt_key": "prompt"},
                "reward": {"custom_reward_function": {"path": FUNCTION}},
                "reasonrl": {"model_rewards": {"judge_domains": judge_domains}},
            }
        )

    bare, asked = data({"index": 0}), data({"index": 0, "question": "q"})
    with pytest.raises(
        UserError, match="no column 'question' .nor a key of extra_info., needed by reasonrl.model_rewards"
    ):
        check_dataset_columns(config(bare, None), reasonrl_dataset_columns(config(bare, None)))
    check_dataset_columns(config(asked, None), reasonrl_dataset_columns(config(asked, None)))
    check_dataset_columns(config(bare, []), reasonrl_dataset_columns(config(bare, [])))  # no model asked
