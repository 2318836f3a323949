"""``reasonrl pipeline``'s bookkeeping: a finished stage is skipped, an unfinished one reruns, a
folder keeps one pipeline's settings, the demo's recipes. (End to end: the opt-in
integration_tests/test_pipeline_demo.py.)"""

from __future__ import annotations

import json

import pytest

from reasonrl.errors import UserError
from reasonrl.pipeline import DONE, Pipeline


def test_a_finished_stage_is_skipped_and_an_unfinished_one_runs_again(tmp_path):
    pipeline = Pipeline("mimo", tmp_path, 8, 4, log=lambda _line: None)
    calls = []

    def stage(folder):
        calls.append(folder.name)
        if len(calls) == 1:
            raise KeyboardInterrupt  # Ctrl-C inside the stage: nothing marked done
        return {"hf_model": str(folder / "model")}

    with pytest.raises(KeyboardInterrupt):
        pipeline.stage("sft", stage)
    assert not (tmp_path / "sft" / DONE).exists()
    assert pipeline.stage("sft", stage) == {"hf_model": str(tmp_path / "sft" / "model")}
    assert pipeline.stage("sft", stage) == {"hf_model": str(tmp_path / "sft" / "model")}  # read back, not run
    assert calls == ["sft", "sft"]
    assert json.loads((tmp_path / "sft" / DONE).read_text())["hf_model"].endswith("model")


def test_a_folder_keeps_one_pipelines_settings(tmp_path):
    Pipeline("mimo", tmp_path, 8, 4).check_settings()
    Pipeline("mimo", tmp_path, 8, 4).check_settings()  # the same: a resume
    with pytest.raises(UserError, match=r"other settings \{'rl_steps': \(4, 5\)\}"):
        Pipeline("mimo", tmp_path, 8, 5).check_settings()


def test_the_demo_runs_recipes_whose_rows_it_can_make():
    Pipeline("longcat", "x", 1, 1)
    with pytest.raises(UserError, match="the demo runs"):
        Pipeline("nemotron", "x", 1, 1)
