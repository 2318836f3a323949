"""Greedy answers of several checkpoints to the questions of verl RL parquets, through vLLM, scored
by a reward function the caller gives (``score(answer, ground_truth) -> float``, importable by its
module and name: the answering process imports it) — the before/after tables of model-level
techniques (a plugin passes its declared reward plugin's function; the core names none).

Every model runs in one fresh process (``python -m reasonrl.greedy_answers``), one vLLM engine
after the other, on CPU each engine in that process too (``VLLM_ENABLE_V1_MULTIPROCESSING=0``):
vLLM and its imports load once (measured on 2 CPU cores, three smoke models: 20 s in all, against
90 s with vLLM's default engine process per model, which imports vLLM again; same answers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from pkgutil import resolve_name
from typing import Callable


def _scorer(name: str) -> Callable[[str, str], float]:
    """The function ``"module:qualname"`` names."""
    return resolve_name(name)


def _importable_name(score: Callable[[str, str], float]) -> str:
    """``"module:qualname"`` of ``score``, checked to name the same function (the answering process
    imports it by this name); a lambda or a nested function is refused here, before any engine."""
    name = f"{score.__module__}:{score.__qualname__}"
    try:
        found = _scorer(name)
    except (ImportError, AttributeError, ValueError):  # ValueError: no valid name (a lambda's <locals>)
        found = None
    if found is not score:
        raise ValueError(f"the scorer must be a module-level function importable by its name, got {name!r}")
    return name


def _answer_one(model: Path, rows: dict[str, list], max_tokens: int, score: Callable[[str, str], float]) -> dict:
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    tokenizer = AutoTokenizer.from_pretrained(model)
    prompts = {
        name: [tokenizer(tokenizer.apply_chat_template([dict(m) for m in r["prompt"]], add_generation_prompt=True, tokenize=False),
                         add_special_tokens=False).input_ids for r in table]
        for name, table in rows.items()
    }  # fmt: skip
    longest = max(len(p) for table in prompts.values() for p in table)
    llm = LLM(model=str(model), dtype="float32", enforce_eager=True, kv_cache_memory_bytes=64 * 1024 * 1024,
              max_model_len=longest + max_tokens, seed=0)  # fmt: skip
    results = {}
    try:
        for name, table in rows.items():
            outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts[name]],
                                   SamplingParams(temperature=0.0, max_tokens=max_tokens))  # fmt: skip
            answers = [o.outputs[0].text for o in outputs]
            scores = [score(a, str(r["reward_model"]["ground_truth"])) for a, r in zip(answers, table)]
            lengths = [len(o.outputs[0].token_ids) for o in outputs]
            results[name] = {
                "reward": sum(scores) / len(scores),
                "mean_length": sum(lengths) / len(lengths),
                "questions": len(scores),
                "answers": answers,
            }
    finally:
        llm.llm_engine.engine_core.shutdown()
    return results


def _answer_all(models: dict[str, str], datasets: dict[str, str], questions: int, max_tokens: int, scorer: str) -> None:
    """In the answering process: one engine per model in turn, a ``RESULT`` line per model."""
    import pandas as pd

    from reasonrl.compat.vllm import offline_engine_in_this_process

    offline_engine_in_this_process()  # on CPU: vLLM imported once for all the models

    score = _scorer(scorer)
    rows = {name: pd.read_parquet(path).to_dict("records")[:questions] for name, path in datasets.items()}
    for label, model in models.items():
        result = _answer_one(Path(model), rows, max_tokens, score)
        print("RESULT " + json.dumps({"model": label, "datasets": result}), flush=True)


def greedy_answers(
    models: dict[str, Path],
    datasets: dict[str, str],
    questions: int,
    max_tokens: int,
    score: Callable[[str, str], float],
) -> dict:
    """``{model: {dataset: {reward, mean_length, questions, answers}}}``: each model's greedy
    answers to the first ``questions`` rows of each dataset (verl RL parquet: ``prompt`` messages,
    ``reward_model.ground_truth``), at most ``max_tokens`` each, scored by ``score(answer,
    ground_truth) -> float``; lengths in tokens."""
    scorer = _importable_name(score)
    request = json.dumps({"models": {k: str(v) for k, v in models.items()}, "datasets": datasets,
                          "questions": questions, "max_tokens": max_tokens, "scorer": scorer})  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "reasonrl.greedy_answers", request],
                          capture_output=True, text=True)  # fmt: skip
    table = {}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            answer = json.loads(line.removeprefix("RESULT "))
            table[answer["model"]] = answer["datasets"]
    if done.returncode != 0 or set(table) != set(models):
        missing = sorted(set(models) - set(table))
        raise RuntimeError(f"answering with {missing} failed:\n{done.stderr[-3000:]}")
    return {label: table[label] for label in models}


if __name__ == "__main__":
    request = json.loads(sys.argv[1])
    _answer_all(request["models"], request["datasets"], request["questions"], request["max_tokens"], request["scorer"])
    os._exit(0)  # vLLM-CPU's native threads can abort the interpreter's teardown after the answers are out
