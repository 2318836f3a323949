"""The pipeline on a hand-made data set: the data card's counts equal the rows known to be dropped,
each drop is written with its reason, a stopped run resumes at its stage, and the output holds
verl's columns."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from reasonrl.plugins.curation.config import REPORTS, Context, build_stages, load_config, skip_stages
from reasonrl.plugins.curation.pipeline import Curation
from reasonrl.plugins.curation.stage import CurationError, Stage

EVAL = "Find the number of positive integers n less than 1000 such that n squared ends in the digits 21 exactly."
ROWS = [
    {"problem": "What is 17 + 25?", "solution": "42"},
    {"problem": "what is 17+25", "solution": "42"},  # exact duplicate of row 0
    {"problem": f"Warm-up: {EVAL.lower()} Please.", "solution": "40"},  # contaminated
    {"problem": "Prove that the square root of 2 is irrational.", "solution": "see proof"},  # proof
    {"problem": "Which is larger? (A) 2^10 (B) 10^3 (C) 3^6", "solution": "A"},  # multiple choice
    {"problem": "Compute the sum of the first ten odd numbers.", "solution": "one hundred"},  # prose reference
    {"problem": "Solve for x: 3x + 5 = 20.", "solution": "5"},
    {"problem": "Evaluate \\int_0^1 x\\,dx.", "solution": "\\frac{1}{2}"},
]  # fmt: skip
STAGES = [
    {"decontaminate": {"n": 16}},
    {"exact_dedup": {}},
    {"near_dedup": {"threshold": 0.8}},
    {"question_types": {}},
    {"verifiable_answer": {}},
]
FIELDS = {"question": "problem", "answer": "solution"}


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "raw.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def curate(source, out, stages=STAGES):
    return Curation(source, FIELDS, build_stages({"stages": stages}, Context([EVAL])), out).run({"data_source": "t"})


def test_the_card_counts_the_known_drops_and_the_output_has_verls_columns(source, tmp_path):
    card = curate(source, tmp_path / "out")
    dropped = {entry["stage"]: entry["dropped"] for entry in card["stages"]}
    assert dropped == {
        "decontaminate": {"contaminated": 1},
        "exact_dedup": {"exact_duplicate": 1},
        "near_dedup": {},
        "question_types": {"multiple_choice": 1, "proof": 1},
        "verifiable_answer": {"prose_reference": 1},
    }
    assert card["read"]["rows"] == 8 and card["output"]["rows"] == 3
    drops = [json.loads(line) for line in (tmp_path / "out" / "stages" / "04_question_types.drops.jsonl").open()]
    assert [(d["id"], d["reason"]) for d in drops] == [("3", "proof"), ("4", "multiple_choice")]
    frame = pd.read_parquet(tmp_path / "out" / "train.parquet")
    assert list(frame.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    assert [row["ground_truth"] for row in frame["reward_model"]] == ["42", "5", "\\frac{1}{2}"]
    first = frame.iloc[0]
    assert first["prompt"][0]["content"] == "What is 17 + 25?" and first["data_source"] == "t"
    assert first["extra_info"]["question"] == "What is 17 + 25?" and first["extra_info"]["source_id"] == "0"
    assert "| question_types | 6 | 2 | 4 | multiple_choice 1, proof 1 |" in (tmp_path / "out" / "card.md").read_text()


class Interrupting(Stage):
    """Stops the run (as Ctrl-C does) at its n-th row; counts the rows it was given."""

    name = "question_types"

    def __init__(self, at: int | None):
        self.at, self.seen = at, 0

    def process(self, row):
        self.seen += 1
        if self.seen == self.at:
            raise KeyboardInterrupt
        return row


def test_a_stopped_run_resumes_at_its_stage_and_a_changed_stage_reruns(source, tmp_path):
    out = tmp_path / "out"
    first = build_stages({"stages": STAGES[:3]}, Context([EVAL]))
    with pytest.raises(KeyboardInterrupt):
        Curation(source, FIELDS, [*first, Interrupting(at=2)], out).run()
    assert not (out / "stages" / "04_question_types.jsonl").exists(), "a stopped stage leaves no finished file"
    assert [e["stage"] for e in json.loads((out / "card.json").read_text())["stages"]] == [s.name for s in first]
    again = build_stages({"stages": STAGES[:3]}, Context([EVAL]))
    resumed = Interrupting(at=None)
    card = Curation(source, FIELDS, [*again, resumed], out).run()
    assert resumed.seen == 6 and card["output"]["rows"] == 6
    seconds = [e["seconds"] for e in card["stages"][:3]]
    assert [e["seconds"] for e in json.loads((out / "card.json").read_text())["stages"][:3]] == seconds
    changed = build_stages({"stages": [STAGES[0], STAGES[1], {"near_dedup": {"threshold": 0.3}}]}, Context([EVAL]))
    rerun = Interrupting(at=None)
    Curation(source, FIELDS, [*changed, rerun], out).run()
    assert rerun.seen == 6, "a stage after a changed one runs again"


def test_every_report_config_builds_and_each_setting_has_its_source():
    for path in sorted(REPORTS.glob("*.yaml")):
        config = load_config(path.stem)
        stages = build_stages(config, Context(["an eval question"], answerer=lambda p, n: [["x"] * n for _ in p]))
        assert [s.name for s in stages] == [next(iter(item)) for item in config["stages"]]
        settings = {f"{name}.{key}" for item in config["stages"] for name, values in item.items() for key in values}
        assert settings == set(config["sources"]), f"{path.name}: every setting and only those have a source"
        for key, source in config["sources"].items():
            assert source["basis"] in ("report", "reading", "assumption") and source["source"], f"{path.name}: {key}"
    assert {p.stem for p in REPORTS.glob("*.yaml")} == {"mimo", "kimi_k15", "nemotron", "longcat"}


def test_bad_configs_are_named_before_any_row_is_read():
    with pytest.raises(CurationError, match="unknown stage 'dedupe'"):
        build_stages({"stages": [{"dedupe": {}}]}, Context())
    with pytest.raises(CurationError, match=r"stages\[1\] near_dedup: .*treshold"):
        build_stages({"stages": [{"near_dedup": {"treshold": 0.5}}]}, Context())
    with pytest.raises(CurationError, match="needs evaluation sets"):
        build_stages({"stages": [{"decontaminate": {}}]}, Context())
    with pytest.raises(CurationError, match="--answer-url"):
        build_stages(load_config("kimi_k15"), Context(["q"]))
    with pytest.raises(CurationError, match="--skip easy: not a stage"):
        skip_stages(load_config("kimi_k15")["stages"], ["easy"])
    assert "easy_to_hack" not in str(skip_stages(load_config("kimi_k15")["stages"], ["easy_to_hack"]))


def test_a_missing_source_column_is_named(source, tmp_path):
    with pytest.raises(CurationError, match="no column 'answer' \\(fields.answer\\)"):
        Curation(source, {"question": "problem", "answer": "answer"}, [], tmp_path / "out").run()
