"""The CPU smoke run's own task, tokenizer, model builder and data (reasonrl/smoke)."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest

from reasonrl.smoke.arithmetic import Problem, compute_score, extract_answer, make_problems
from reasonrl.smoke.model import TinyModelSpec, build_tiny_model
from reasonrl.smoke.tokenizer import build_tokenizer


@pytest.mark.parametrize(
    ("response", "truth", "score"),
    [
        ("58", "58", 1.0),
        (" 58<eos>", "58", 1.0),
        ("58 and more", "58", 1.0),
        ("5", "58", 0.0),
        ("580", "58", 0.0),
        ("", "0", 0.0),
        ("+58", "58", 0.0),
    ],
)
def test_reward_is_exact_leading_number(response, truth, score):
    assert compute_score("reasonrl/arithmetic", response, truth) == score


def test_problems_are_distinct_seeded_and_correct():
    first, again, other = make_problems(300, seed=3), make_problems(300, seed=3), make_problems(300, seed=4)
    assert first == again and first != other and len(set(first)) == 300
    assert all(int(p.answer) == p.a + p.b and p.prompt == f"{p.a}+{p.b}=" for p in first)
    with pytest.raises(ValueError):
        make_problems(10_001, seed=0)


def test_tokenizer_round_trips_and_templates_the_prompt():
    tokenizer = build_tokenizer()
    ids = tokenizer("49+49=98")["input_ids"]
    assert len(ids) == 8 and tokenizer.decode(ids) == "49+49=98"
    assert (
        tokenizer.apply_chat_template([{"role": "user", "content": "1+2="}], tokenize=False, add_generation_prompt=True)
        == "1+2="
    )
    assert (
        extract_answer(
            tokenizer.decode(tokenizer("12")["input_ids"] + [tokenizer.eos_token_id], skip_special_tokens=True)
        )
        == "12"
    )


def test_saved_tokenizer_reloads_as_verl_and_vllm_load_it(tmp_path):
    """verl and vLLM load the model folder with AutoTokenizer (Qwen2Tokenizer for qwen2)."""
    from transformers import AutoTokenizer

    spec = dataclasses.replace(TinyModelSpec(), warmup_steps=1, warmup_target_accuracy=0)
    build_tiny_model(tmp_path, spec, make_problems(4, seed=0))
    built, loaded = build_tokenizer(), AutoTokenizer.from_pretrained(tmp_path)
    for text in ["49+49=98", "1 + 2 = 3\n", "\n", "7*8?", "0-9"]:
        assert loaded.encode(text, add_special_tokens=False) == built.encode(text, add_special_tokens=False)
        assert loaded.decode(loaded.encode(text, add_special_tokens=False)) == text
    assert loaded.eos_token == "<|im_end|>" and loaded.eos_token_id == built.eos_token_id
    assert len(loaded.encode("\n", add_special_tokens=False)) == 1  # verl's Qwen rollout builder needs this
    assert loaded.unk_token_id not in loaded.encode("0123456789+-=*? \n", add_special_tokens=False)


def test_model_build_is_byte_identical(tmp_path):
    spec = dataclasses.replace(TinyModelSpec(), warmup_steps=3, warmup_target_accuracy=0)
    problems = make_problems(16, seed=0)
    digests = []
    for name in ("a", "b"):
        summary = build_tiny_model(tmp_path / name, spec, problems)
        digests.append(hashlib.sha256((tmp_path / name / "model.safetensors").read_bytes()).hexdigest())
    assert digests[0] == digests[1]
    assert summary["warmup_loss_last"] < summary["warmup_loss_first"]
    config = (tmp_path / "a" / "config.json").read_text()
    assert '"head_dim"' not in config or '"head_dim": 32' in config  # vLLM CPU needs head_dim >= 32
    assert spec.hidden_size // spec.num_heads >= 32


def test_prepare_builds_once_and_rebuilds_on_a_new_spec(tmp_path, monkeypatch):
    from reasonrl.smoke import prepare as prepare_module

    calls = []
    real = prepare_module.build_tiny_model
    monkeypatch.setattr(prepare_module, "build_tiny_model", lambda *a, **k: calls.append(1) or real(*a, **k))
    spec = dataclasses.replace(TinyModelSpec(), warmup_steps=2, warmup_target_accuracy=0)
    root = prepare_module.prepare(tmp_path / "smoke", spec)
    assert (root / "model" / "tokenizer.json").exists()
    assert all((root / "data" / recipe / "train.parquet").exists() for recipe in prepare_module.RECIPES)
    prepare_module.prepare(tmp_path / "smoke", spec)
    assert len(calls) == 1
    prepare_module.prepare(tmp_path / "smoke", dataclasses.replace(spec, seed=1))
    assert len(calls) == 2


def test_a_launch_that_starts_during_a_build_waits_for_it_and_does_not_build_again(tmp_path, monkeypatch):
    """Two launches at once on a fresh cache: the second waits on the first's lock, then finds the
    assets (a second build would first delete the tree the first launch is reading)."""
    import fcntl
    import threading

    from reasonrl.smoke import prepare as prepare_module

    builds = []
    monkeypatch.setattr(prepare_module, "_build", lambda *a: builds.append(a))
    spec = dataclasses.replace(TinyModelSpec(), warmup_steps=2, warmup_target_accuracy=0)
    root = tmp_path / "smoke"
    with open(tmp_path / ".smoke.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first launch, building
        second = threading.Thread(target=prepare_module.prepare, args=(root, spec))
        second.start()
        second.join(timeout=1.0)
        assert second.is_alive(), "the second launch waits for the build"
        root.mkdir()
        (root / "STAMP").write_text(f"{spec.digest()} {prepare_module.DATA_LAYOUT}")  # the build finishes
    second.join(timeout=30)
    assert not second.is_alive() and builds == [], "it found the assets instead of building"


def test_warm_start_never_sees_the_held_out_problems(monkeypatch):
    from reasonrl.smoke import model as model_module

    seen: list[tuple[str, str]] = []
    real_batch = model_module.supervised_batch
    monkeypatch.setattr(
        model_module, "supervised_batch", lambda pairs, tok: seen.extend(pairs) or real_batch(pairs, tok)
    )
    spec = dataclasses.replace(TinyModelSpec(), warmup_steps=20, warmup_problems=40, warmup_target_accuracy=0)
    held_out = set(model_module.warmup_pool(spec, exclude=set())[:30])  # the warm-start pool's own head
    tokenizer = build_tokenizer()
    from transformers import Qwen2ForCausalLM

    model = Qwen2ForCausalLM(model_module.model_config(spec, tokenizer))
    model_module.warm_start(model, tokenizer, spec, exclude=held_out)
    assert len(seen) == 20 * spec.warmup_batch
    assert {form for form in map(prompt_format, seen)} == {"plain", "thinking", "code"}
    assert {p.prompt for p in held_out}.isdisjoint(map(sum_prompt, seen))


def test_warm_start_goes_on_until_the_check_set_reaches_its_target(monkeypatch):
    """Where the accuracy climbs depends on the CPU's float kernels: from warmup_steps on, every
    WARMUP_CHECK_EVERY steps, the warm start checks a held-apart set and stops at the target or at
    warmup_max_steps."""
    from transformers import Qwen2ForCausalLM

    from reasonrl.smoke import model as model_module

    tokenizer = build_tokenizer()
    exclude = set(make_problems(50, seed=0))
    checked: list[int] = []
    accuracies = iter([0.1, 0.3, 0.5, 0.9])
    real_accuracy = model_module.greedy_accuracy

    def accuracy(model, tok, problems):
        assert not model.training and len(problems) == model_module.WARMUP_CHECK_PROBLEMS
        checked.append(len(losses_so_far))
        real_accuracy(model, tok, problems[:2])  # the real call runs; the value is scripted
        return next(accuracies)

    losses_so_far: list = []
    real_batch = model_module.supervised_batch
    monkeypatch.setattr(model_module, "greedy_accuracy", accuracy)
    monkeypatch.setattr(
        model_module, "supervised_batch", lambda pairs, tok: losses_so_far.append(1) or real_batch(pairs, tok)
    )
    every = model_module.WARMUP_CHECK_EVERY
    spec = dataclasses.replace(TinyModelSpec(), warmup_steps=3, warmup_target_accuracy=0.4, warmup_max_steps=500)
    model = Qwen2ForCausalLM(model_module.model_config(spec, tokenizer))
    losses = model_module.warm_start(model, tokenizer, spec, exclude=exclude)
    assert checked == [3, 3 + every, 3 + 2 * every] and len(losses) == 3 + 2 * every  # 0.1, 0.3, then 0.5
    capped = dataclasses.replace(spec, warmup_target_accuracy=0.99, warmup_max_steps=3 + every)
    accuracies, checked[:], losses_so_far[:] = iter([0.1] * 5), [], []
    assert len(model_module.warm_start(model, tokenizer, capped, exclude=exclude)) == 3 + every
    assert checked == [3]  # the check at the cap is not needed: training stops there
    check_set = model_module.warmup_check_set(spec, exclude)
    pool = model_module.warmup_pool(spec, exclude)
    assert len(check_set) == model_module.WARMUP_CHECK_PROBLEMS
    assert set(check_set).isdisjoint(pool) and set(check_set).isdisjoint(exclude)


def prompt_format(pair: tuple[str, str]) -> str:
    prompt = pair[0]
    return "code" if prompt.startswith("?") else "thinking" if "\n" in prompt else "plain"


def sum_prompt(pair: tuple[str, str]) -> str | None:
    """The ``a+b=`` prompt inside a warm-start prompt (None for code prompts: they name only b,
    so the 100 code prompts are shared by the warm start and the RL data by design)."""
    return None if prompt_format(pair) == "code" else pair[0].rsplit("\n", 1)[-1]


def test_prepared_splits_are_disjoint_and_unseen_by_the_warm_start(tmp_path, monkeypatch):
    import pandas as pd

    from reasonrl.smoke import model as model_module
    from reasonrl.smoke import prepare as prepare_module

    seen: list[tuple[str, str]] = []
    real_batch = model_module.supervised_batch
    monkeypatch.setattr(
        model_module, "supervised_batch", lambda pairs, tok: seen.extend(pairs) or real_batch(pairs, tok)
    )
    root = prepare_module.prepare(
        tmp_path / "smoke", dataclasses.replace(TinyModelSpec(), warmup_steps=30, warmup_target_accuracy=0)
    )

    def prompts(split: str) -> set[str]:
        frame = pd.read_parquet(root / "data" / "kimi_k15" / f"{split}.parquet")  # plain problems only
        return {row[0]["content"] for row in frame["prompt"]}

    train, val = prompts("train"), prompts("val")
    assert (len(train), len(val)) == (prepare_module.TRAIN_PROBLEMS, prepare_module.VAL_PROBLEMS)
    assert train.isdisjoint(val)
    assert set(map(sum_prompt, seen)).isdisjoint(train | val), "the warm start never sees an RL or validation sum"


def test_every_task_format_is_what_the_chat_template_renders_for_its_data_row():
    """The warm start's prompts (``formatted``) equal what verl renders from each recipe's rows
    (the nemotron toggle added by the rewards plugin's dataset class, ``with_thinking_prompt``)."""
    from reasonrl.plugins.rewards.thinking_format import format_ok, with_thinking_prompt
    from reasonrl.smoke.arithmetic import formatted
    from reasonrl.smoke.data import verl_rows

    tokenizer = build_tokenizer()
    problem = Problem(12, 34)

    def rendered(messages):
        return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)

    plain, code = verl_rows([problem] * 4, "train", "mimo")[0], verl_rows([problem] * 4, "train", "mimo")[3]
    assert rendered(plain["prompt"]) == formatted(problem, "plain")[0] == "12+34="
    assert rendered(code["prompt"]) == formatted(problem, "code")[0] == "?+34="
    on, off = verl_rows([problem] * 2, "train", "nemotron")
    for row, mode in ((on, "on"), (off, "off")):
        assert row["extra_info"]["thinking"] == mode
        prompt, answer = formatted(problem, f"thinking_{mode}")
        assert rendered(with_thinking_prompt(row["prompt"], mode)) == prompt == f"detailed thinking {mode}\n12+34="
        assert format_ok(answer, mode) and not format_ok(answer, "off" if mode == "on" else "on")
    for form in ("plain", "thinking_on", "thinking_off", "code"):  # every character is in the vocabulary
        assert tokenizer.unk_token_id not in tokenizer("".join(formatted(problem, form)))["input_ids"]


def test_recipe_data_mixes_the_recipes_own_tasks():
    from reasonrl.smoke.data import CODE_EVERY, verl_rows

    problems = make_problems(8, seed=0)
    mimo = verl_rows(problems, "train", "mimo")
    assert [row["ability"] for row in mimo].count("code") == len(problems) // CODE_EVERY
    assert all(row["extra_info"]["thinking"] is None for row in mimo)
    assert [row["extra_info"]["thinking"] for row in verl_rows(problems, "train", "nemotron")] == ["on", "off"] * 4
    assert {row["ability"] for row in verl_rows(problems, "train", "longcat")} == {"math"}
    # every row shows a judge or reward model its question (extra_info.question)
    assert [row["extra_info"]["question"] for row in mimo] == [
        p.code_prompt if row["ability"] == "code" else p.prompt for p, row in zip(problems, mimo)
    ]
    # nemotron_if: the nemotron rows with IFEval constraints, the sum as the keyword
    instruction = verl_rows(problems, "train", "nemotron_if")
    assert [row["extra_info"]["thinking"] for row in instruction] == ["on", "off"] * 4
    for problem, row in zip(problems, instruction):
        assert row["extra_info"]["instruction_id_list"] == ["keywords:existence", "length_constraints:number_words"]
        assert row["extra_info"]["kwargs"][0] == {"keywords": [problem.answer]}


def test_a_code_row_is_judged_with_its_test_difficulty_calibration():
    """The reasonrl reward path on a smoke code problem, in the real sandbox: the right program
    earns 1, the constant ``print(b)`` passes the easy test only (strict: half), a wrong one 0. The
    row's calibration comes from its reference verdicts through the rewards plugin's
    ``reasonrl_prepare_rows``."""
    import asyncio

    from reasonrl.plugins.rewards.config import RewardsConfig
    from reasonrl.plugins.rewards.scoring import code_spec, make_judge, score_code
    from reasonrl.smoke.data import CODE_EVERY, verl_rows

    problem = Problem(12, 34)
    row = verl_rows([problem] * CODE_EVERY, "train", "mimo")[-1]
    assert row["ability"] == "code" and "difficulty" in json.loads(row["reward_model"]["ground_truth"])
    tests, calibration = code_spec(row["reward_model"]["ground_truth"], row["extra_info"])
    assert calibration is not None and calibration.levels == (0, 1, 1)
    judge = make_judge(RewardsConfig(judge_workers=1))

    async def score(response):
        return await score_code(judge, tests, calibration, response, "strict")

    right = asyncio.run(score(problem.code_answer))
    constant = asyncio.run(score("```\nprint(34)\n```"))
    wrong = asyncio.run(score("```\nprint(int(input())+35)\n```"))
    assert (right.task_score, right.level_pass) == (1.0, "11")
    assert (constant.task_score, constant.level_pass, constant.levels_passed) == (0.5, "10", 1)
    assert (wrong.task_score, wrong.level_pass) == (0.0, "00")
