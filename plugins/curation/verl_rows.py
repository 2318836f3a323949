"""Curated rows as verl's RL parquet rows: the columns verl's RL dataset and reasonrl's recipes read
(``prompt``, ``data_source``, ``ability``, ``reward_model.ground_truth``: the reference, or a code
problem's tests as JSON; ``extra_info``: ``question`` for model-scored rewards, ``pass_rate`` for
the curricula and the offline difficulty filter, ``solution_test_verdicts`` for MiMo's
test-difficulty calibration)."""

from __future__ import annotations

import json

import pyarrow as pa

from reasonrl.plugins.curation.stage import Row

SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        (
            "extra_info",
            pa.struct(
                [
                    ("split", pa.string()),
                    ("index", pa.int64()),
                    ("question", pa.string()),
                    ("source_id", pa.string()),
                    ("pass_rate", pa.float64()),
                    ("solution_test_verdicts", pa.list_(pa.list_(pa.bool_()))),
                ]
            ),
        ),
    ]
)


def verl_row(row: Row, index: int, output: dict) -> dict:
    """``output``: ``data_source`` and ``ability`` (defaults for rows without their own),
    ``prompt_template`` (the user message; ``{question}`` is replaced), ``split``."""
    question = str(row["question"])
    tests = row.get("tests")
    if tests:
        tests = json.loads(tests) if isinstance(tests, str) else dict(tests)
        truth = json.dumps({"problem_id": str(row["id"]), **tests})
    else:
        truth = str(row["answer"])
    template = output.get("prompt_template", "{question}")
    return {
        "data_source": row.get("data_source") or output.get("data_source", "reasonrl/curated"),
        "prompt": [{"role": "user", "content": template.format(question=question)}],
        "ability": row.get("ability") or ("code" if tests else output.get("ability", "math")),
        "reward_model": {"style": "rule", "ground_truth": truth},
        "extra_info": {
            "split": output.get("split", "train"),
            "index": index,
            "question": question,
            "source_id": str(row["id"]),
            "pass_rate": None if row.get("pass_rate") is None else float(row["pass_rate"]),
            "solution_test_verdicts": row.get("solution_test_verdicts"),
        },
    }
