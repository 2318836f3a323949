"""The overhead bench's reading of a run's metrics (its launches run in ``reasonrl bench overhead``)."""

import json
import os

import pytest

from benchmarks.core.overhead import STEP, step_records, technique_rows
from reasonrl.callbacks import CALLBACK_TIMING


def write_launch(run_dir, name, records, mtime):
    path = run_dir / "metrics" / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"step": step, "data": data}) + "\n" for step, data in records))
    os.utime(path, (mtime, mtime))


def test_step_records_merge_a_resumed_runs_launches_and_keep_training_steps_only(tmp_path):
    run = tmp_path / "run"
    callback = CALLBACK_TIMING + "sampling"
    write_launch(run, "first", [(0, {"val-core/acc": 0.1}), (1, {STEP: 4.0, callback: 0.02})], mtime=1)
    # the resumed launch validates at the saved step (no step time), then trains steps 2 and 3
    write_launch(run, "resumed", [(1, {"val-core/acc": 0.2}), (2, {STEP: 3.0, callback: 0.01}), (3, {STEP: 5.0})], 2)
    steps = step_records(run)
    assert sorted(steps) == [1, 2, 3]
    assert steps[1]["val-core/acc"] == 0.2 and steps[1][STEP] == 4.0, "a step's records merged across launches"
    rows = dict(technique_rows(steps))
    assert rows["whole step"] == pytest.approx(4.0)  # median of steps 2 and 3
    assert rows["callback sampling"] == pytest.approx(0.005)  # a step without the callback counts 0
