"""``reasonrl pipeline recipe=mimo --demo DIR`` end to end on CPU (opt-in: ``pytest --run-slow``;
~10 minutes here, past CI's budget): curation drops exactly the rows planted for it, SFT starts from
the smoke model, RL from the SFT model on the curated data, and the evaluation compares the three.
Ctrl-C during RL stops the pipeline; the same command resumes — the finished stages skipped, RL
from its last checkpoint — and a relaunch with other settings in the same folder is refused."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from reasonrl.testing.cpu_runs import (
    assert_steps_trained,
    interrupt_after_first_checkpoint,
    launch_metrics,
    reasonrl_command,
    run_to_end,
    tail,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(2400)]

SFT_STEPS, RL_STEPS = 8, 4


def weights(folder: str | Path) -> dict:
    return load_file(next(Path(folder).glob("*.safetensors")))


def test_pipeline_demo_runs_every_stage_and_resumes_after_ctrl_c(tmp_path, run_tag):
    demo = tmp_path / "demo"
    args = [*reasonrl_command(), "pipeline", "recipe=mimo", "--demo", str(demo),
            "--sft-steps", str(SFT_STEPS), "--rl-steps", str(RL_STEPS)]  # fmt: skip
    first = tmp_path / "first.log"
    saved = interrupt_after_first_checkpoint(args, demo / "rl", first, run_tag, RL_STEPS, demo / "rl" / "train.log")
    assert "reasonrl pipeline: interrupted; run the same command to resume" in first.read_text(), tail(first)
    assert not (demo / "rl" / "STAGE_DONE.json").exists(), "an interrupted stage is not done"

    second = tmp_path / "second.log"
    result = run_to_end(args, run_tag, second)
    text = second.read_text()
    assert result.returncode == 0, tail(second)
    for stage in ("inputs", "data", "sft"):
        assert f"[pipeline] {stage}: done, skipped" in text
    _first_launch, resumed = launch_metrics(demo / "rl")
    assert_steps_trained(resumed, range(saved + 1, RL_STEPS + 1), demo / "rl" / "train.log")

    # curation: the planted rows dropped, each by its stage, and nothing else but the too easy
    card = json.loads((demo / "data" / "card.json").read_text())
    dropped = {entry["stage"]: entry["dropped"] for entry in card["stages"]}
    assert dropped["decontaminate"] == {"contaminated": 4} and dropped["exact_dedup"] == {"exact_duplicate": 4}
    assert dropped["verifiable_answer"] == {"prose_reference": 4}
    # the chain: SFT from the smoke model, RL from the SFT model on the curated rows
    sft = json.loads((demo / "sft" / "STAGE_DONE.json").read_text())["hf_model"]
    rl = json.loads((demo / "rl" / "STAGE_DONE.json").read_text())
    train_log = (demo / "rl" / "train.log").read_text()
    assert f"'path': '{sft}'" in train_log and f"'train_files': '{card['output']['path']}'" in train_log
    assert rl["step"] == RL_STEPS
    from reasonrl.smoke.prepare import prepare

    start, after_sft, after_rl = weights(prepare() / "model"), weights(sft), weights(rl["hf_model"])
    name = "model.layers.0.mlp.down_proj.weight"
    assert not torch.equal(start[name], after_sft[name]) and not torch.equal(after_sft[name], after_rl[name])

    # the before/after table: each column the evaluation's own results
    table = (demo / "results.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| bench | avg@4 |"))
    cells = [float(x) for x in re.findall(r"\d\.\d{3}", row)]
    expected = [json.loads((demo / "eval" / label / "results.json").read_text())["benchmarks"]["bench"]["avg@4"]
                for label in ("start", "sft", "rl")]  # fmt: skip
    assert cells == [round(value, 3) for value in expected], (row, expected)
    assert (demo / "eval" / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print(table)

    other = subprocess.run([*args[:-1], str(RL_STEPS + 1)], capture_output=True, text=True, timeout=300)
    assert other.returncode == 2 and "other settings" in other.stderr, other.stderr[-2000:]
