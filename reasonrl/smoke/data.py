"""The arithmetic task as verl RL parquet files (verl's ``RLHFDataset`` format)."""

from __future__ import annotations

from pathlib import Path

from reasonrl.smoke.arithmetic import DATA_SOURCE, Problem


def verl_rows(problems: list[Problem], split: str) -> list[dict]:
    """One verl row per problem: chat prompt, rule-based ground truth, index."""
    return [
        {
            "data_source": DATA_SOURCE,
            "prompt": [{"role": "user", "content": problem.prompt}],
            "ability": "arithmetic",
            "reward_model": {"style": "rule", "ground_truth": problem.answer},
            "extra_info": {"split": split, "index": index},
        }
        for index, problem in enumerate(problems)
    ]


def write_parquet(problems: list[Problem], split: str, path: Path) -> Path:
    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(verl_rows(problems, split)).to_parquet(path)
    return path
