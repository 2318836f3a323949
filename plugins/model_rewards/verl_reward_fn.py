"""verl adapter: the verdict and constraint rewards as verl's custom reward function.

The option files set ``reward.custom_reward_function.path =
pkg://reasonrl.plugins.model_rewards.verl_reward_fn`` (name ``compute_score``) and hand it the
``reasonrl.model_rewards`` section through ``reward_kwargs``. verl calls it once per response in
its reward loop; with ``reward.reward_model.enable`` verl serves the judge itself and passes its
router's address (``reward_router_address``), which this function asks (no second serving path);
``judge_url`` points at any other OpenAI-compatible server instead.

Per response:
- a row whose ``extra_info`` lists ``instruction_id_list`` (+ ``kwargs``): the constraint reward;
- a row whose ``data_source`` is one of ``rm_domains``: the discriminative reward model's score
  (``score_reward.py``: the server's ``/classify`` endpoint, as verl's own reward-model path asks
  it); the question is ``extra_info["question"]``;
- a row whose ``data_source`` is one of ``judge_domains`` (every row when unset): the verdict
  reward (Math-Verify first, through ``reasonrl.api.math_reward``); the question is
  ``extra_info["question"]``;
- any other row: declined (``score`` None), which reasonrl's reward manager scores with its own
  rewards.

Every response gets the same ``judge_*`` / ``constraints_*`` keys (verl needs one key set per
batch), which the ``model_rewards`` callback sums into the step's metrics.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from typing import Any

from reasonrl.plugins.model_rewards.config import ModelRewardsConfig
from reasonrl.plugins.model_rewards.verdict_reward import VerdictReward, VerdictSettings

SOURCES = ("rule", "empty", "model", "cache", "unparsed", "timeout", "error")
RM_SOURCES = ("scored", "timeout", "error")
EXTRA_KEYS = tuple(f"judge_{source}" for source in SOURCES) + (
    "judge_yes",
    *(f"rm_{source}" for source in RM_SOURCES),
    "constraints_checked",
    "constraints_followed",
)

_rewards: dict[tuple, VerdictReward] = {}
_score_rewards: dict[tuple, Any] = {}


def _settings(model_rewards: Any) -> ModelRewardsConfig:
    from omegaconf import DictConfig, OmegaConf

    section = (
        OmegaConf.to_container(model_rewards, resolve=True) if isinstance(model_rewards, DictConfig) else model_rewards
    )
    return _validated(json.dumps(dict(section or {}), sort_keys=True))


def _require_question(extra_info: dict, data_source: str, why: str) -> None:
    # an empty question would be scored silently out of the model's distribution
    if extra_info.get("question") is None:
        raise ValueError(f"reasonrl.model_rewards: a {data_source!r} row has no extra_info.question ({why})")


def _plain(arguments: Any) -> dict:
    """One constraint's arguments as plain Python: rows read from parquet may hold numpy arrays,
    which IFEval's checks test for truth (ambiguous for more than one element)."""
    return {
        key: (value.tolist() if hasattr(value, "tolist") else value) for key, value in dict(arguments or {}).items()
    }


@functools.lru_cache(maxsize=8)
def _validated(section: str) -> ModelRewardsConfig:
    # once per distinct section, not per response: validation reads the template file
    from reasonrl.config import validate_group
    from reasonrl.plugins.model_rewards.config import MODEL_REWARDS_GROUP

    return validate_group(MODEL_REWARDS_GROUP, json.loads(section))


def verdict_reward(settings: ModelRewardsConfig, router: str | None, judge_model_path: str | None) -> VerdictReward:
    """This process's verdict reward for these settings and this event loop (built once)."""
    from reasonrl.api import math_reward
    from reasonrl.plugins.model_rewards.judge_client import openai_chat
    from reasonrl.plugins.model_rewards.templates import load_templates

    url, model = judge_address(settings, router, judge_model_path)
    key = (repr(settings), url, model, id(asyncio.get_running_loop()))
    if key not in _rewards:
        ask = openai_chat(url, model, settings.judge_max_tokens, settings.judge_temperature)
        # the knobs VerdictSettings has, by name, from the validated section
        verdicts = VerdictSettings(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(VerdictSettings)})
        template = load_templates(settings.template_file)[settings.template]
        _rewards[key] = VerdictReward(template, ask, verdicts, rule=math_reward)
    return _rewards[key]


def judge_address(settings: ModelRewardsConfig, router: str | None, judge_model_path: str | None) -> tuple[str, str]:
    url = settings.judge_url or router
    model = settings.judge_model or judge_model_path
    if not url or not model:
        raise ValueError(
            "reasonrl.model_rewards: no model to ask: enable verl's reward model (reward.reward_model.enable=true "
            "with its model_path) or set judge_url and judge_model"
        )
    return url, model


def score_reward(settings: ModelRewardsConfig, router: str | None, judge_model_path: str | None, tokenizer: Any):
    """This process's discriminative reward for these settings and this event loop (built once);
    the reward model's own tokenizer (verl hands it over) or, for ``judge_url``, one loaded from
    ``judge_model``."""
    from reasonrl.plugins.model_rewards.score_reward import ScoreReward

    url, model = judge_address(settings, router, judge_model_path)
    key = (repr(settings), url, model, id(asyncio.get_running_loop()))
    if key not in _score_rewards:
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(model)
        _score_rewards[key] = ScoreReward(
            url, model, tokenizer, settings.rm_activation, settings.timeout_s, settings.timeout_score,
            settings.max_concurrency,
        )  # fmt: skip
    return _score_rewards[key]


async def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    reward_router_address: str | None = None,
    reward_model_tokenizer: Any = None,
    model_rewards: Any = None,
    judge_model_path: str | None = None,
    **_: Any,
) -> dict[str, Any]:
    """verl's custom-reward signature; returns ``{"score": float | None, <EXTRA_KEYS>: 0 / 1}``."""
    settings = _settings(model_rewards)
    extra_info = dict(extra_info or {})
    out: dict[str, Any] = {key: 0.0 for key in EXTRA_KEYS}
    if extra_info.get("instruction_id_list") is not None:
        from reasonrl.plugins.model_rewards.constraints import constraint_reward

        ids = list(extra_info["instruction_id_list"])
        arguments = extra_info.get("kwargs")  # a list, or a numpy array of dicts as read from parquet
        kwargs = [_plain(k) for k in ([{}] * len(ids) if arguments is None else arguments)]
        scored = constraint_reward(
            solution_str, ids, kwargs, str(extra_info.get("prompt", "")), settings.constraint_reward
        )
        out.update(score=scored.score, constraints_checked=1.0, constraints_followed=float(all(scored.followed)))
        return out
    if settings.rm_domains and data_source in settings.rm_domains:
        _require_question(
            extra_info, data_source, "rm_domains: the reward model scores the (question, response) conversation"
        )
        reward = score_reward(settings, reward_router_address, judge_model_path, reward_model_tokenizer)
        scored = await reward.score(str(extra_info["question"]), solution_str)
        out.update({"score": scored.score, f"rm_{scored.source}": 1.0})
        return out
    if settings.judge_domains is not None and data_source not in settings.judge_domains:
        out["score"] = None  # not a judged domain: the reward manager's own rewards score it
        return out
    _require_question(extra_info, data_source, "judged: the judge's template shows the question")
    reward = verdict_reward(settings, reward_router_address, judge_model_path)
    verdict = await reward.score(str(extra_info["question"]), str(ground_truth), solution_str)
    out.update({"score": verdict.score, f"judge_{verdict.source}": 1.0})
    out["judge_yes"] = float(verdict.source in ("model", "cache") and verdict.score >= 1.0)  # the judge's yes
    return out
