"""Each model's validation reward on each domain (the domain-parallel pipeline's table): greedy
vLLM answers to the first ``questions`` rows of every domain's validation parquet, scored by the
rewards plugin's math reward (a declared requirement; ``reasonrl.greedy_answers``: every model in one process).
"""

from __future__ import annotations

import json
from pathlib import Path

from reasonrl.greedy_answers import greedy_answers


def evaluate_models(
    models: dict[str, Path], domains: dict[str, str], questions: int, max_tokens: int, out: Path, log=print
) -> dict:
    """``{model: {domain: {reward, mean_length, questions, answers}}}``; also written as
    evaluation.json / .md / .png under ``out``."""
    from reasonrl.api import math_reward  # the rewards plugin's (merging requires it)

    log(f"evaluating {', '.join(models)} on {sorted(domains)} ({questions} questions each, greedy)")
    table = greedy_answers(models, domains, questions, max_tokens, math_reward)
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
