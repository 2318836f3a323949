"""Shortest rejection sampling and DPO pairs from a verl RL parquet (Kimi k1.5 §2.4), through
vLLM (adapter: vLLM is imported inside :func:`generate`).

Each question is sampled ``n`` times by vLLM (one request with ``SamplingParams(n=...)``), every
response scored by the rewards plugin's math reward (``reasonrl.api.math_reward``, Math-Verify
against the row's ``reward_model.ground_truth``), then :mod:`selection` picks the SFT response
and the DPO pairs. Outputs: a verl SFT parquet (``messages``: the prompt's messages plus the
shortest correct response), a DPO parquet in the conversational prompt/chosen/rejected form, and
every sample with its length and verdict (JSONL) for audit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from reasonrl.plugins.long2short.selection import Sample, check_samples_per_question, dpo_negatives, shortest_correct


def generate(model: Path, prompts: Sequence[list[dict]], n: int, max_tokens: int, temperature: float, seed: int):
    """Per prompt (chat messages), ``n`` sampled responses as (text, token count)."""
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    tokenizer = AutoTokenizer.from_pretrained(model)
    texts = [tokenizer.apply_chat_template(list(p), add_generation_prompt=True, tokenize=False) for p in prompts]
    token_prompts = [TokensPrompt(prompt_token_ids=tokenizer(t, add_special_tokens=False).input_ids) for t in texts]
    longest = max(len(p["prompt_token_ids"]) for p in token_prompts)
    llm = LLM(
        model=str(model),
        dtype="float32",
        enforce_eager=True,
        kv_cache_memory_bytes=64 * 1024 * 1024,
        max_model_len=longest + max_tokens,
        seed=seed,
    )
    try:
        outputs = llm.generate(
            token_prompts, SamplingParams(n=n, temperature=temperature, max_tokens=max_tokens, seed=seed)
        )
        return [[(c.text, len(c.token_ids)) for c in out.outputs] for out in outputs]
    finally:
        llm.llm_engine.engine_core.shutdown()


def score(responses: Sequence[tuple[str, int]], gold: str) -> list[Sample]:
    from reasonrl.api import math_reward

    return [Sample(text, length, math_reward(text, gold) == 1.0) for text, length in responses]


def build(rows: Sequence[dict], scored: Sequence[Sequence[Sample]]) -> tuple[list[dict], list[dict], dict]:
    """(SFT rows, DPO rows, statistics) from each question's scored samples."""
    sft, dpo = [], []
    for row, group in zip(rows, scored):
        prompt = [dict(m) for m in row["prompt"]]
        keep = shortest_correct(group)
        if keep is not None:
            sft.append(
                {
                    "messages": [*prompt, {"role": "assistant", "content": group[keep].text}],
                    "data_source": row.get("data_source", ""),
                    "extra_info": dict(row.get("extra_info") or {}),
                }
            )
        positive, negatives = dpo_negatives(group)
        for negative in negatives:
            dpo.append(
                {
                    "prompt": prompt,
                    "chosen": [{"role": "assistant", "content": group[positive].text}],
                    "rejected": [{"role": "assistant", "content": group[negative].text}],
                }
            )
    every = [s for group in scored for s in group]
    correct = [s for s in every if s.correct]
    kept = [group[i] for group in scored if (i := shortest_correct(group)) is not None]
    stats = {
        "questions": len(rows),
        "samples": len(every),
        "questions_with_a_correct_sample": len(kept),
        "accuracy": len(correct) / max(1, len(every)),
        "mean_length_all": sum(s.length for s in every) / max(1, len(every)),
        "mean_length_correct": sum(s.length for s in correct) / max(1, len(correct)),
        "mean_length_kept": sum(s.length for s in kept) / max(1, len(kept)),
        "sft_rows": len(sft),
        "dpo_pairs": len(dpo),
    }
    return sft, dpo, stats


def run(
    model: Path,
    data: Path,
    n: int,
    max_tokens: int,
    temperature: float,
    seed: int,
    limit: int | None,
    sft_out: Path,
    dpo_out: Path,
    samples_out: Path | None = None,
) -> dict:
    import pandas as pd

    check_samples_per_question(n)
    frame = pd.read_parquet(data)
    rows = frame.to_dict("records")[: limit or None]
    generated = generate(model, [r["prompt"] for r in rows], n, max_tokens, temperature, seed)
    scored = [score(responses, str(r["reward_model"]["ground_truth"])) for r, responses in zip(rows, generated)]
    sft, dpo, stats = build(rows, scored)
    for path, table in ((sft_out, sft), (dpo_out, dpo)):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(table).to_parquet(path)
    if samples_out is not None:
        with open(samples_out, "w") as out:
            for index, group in enumerate(scored):
                out.write(json.dumps({"question": index, "samples": [asdict(s) for s in group]}) + "\n")
    return stats
