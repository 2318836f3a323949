"""The progress display follows what verl's own file logger writes."""

from __future__ import annotations

import io
import os

from reasonrl.progress import ProgressDisplay, latest_checkpoint, summary_lines, validation_score


def verl_file_logger(path):
    from verl.utils.tracking import FileLogger

    os.environ["VERL_FILE_LOGGER_PATH"] = str(path)
    try:
        return FileLogger("project", "experiment")
    finally:
        del os.environ["VERL_FILE_LOGGER_PATH"]


def step_metrics(reward: float, seconds: float = 2.0) -> dict[str, float]:
    return {"critic/score/mean": reward, "actor/pg_loss": -0.01, "response_length/mean": 3.0, "timing_s/step": seconds}


def test_one_line_per_step_as_verl_logs_them(tmp_path):
    path, out = tmp_path / "metrics.jsonl", io.StringIO()
    logger = verl_file_logger(path)
    display = ProgressDisplay(path, total_steps=4, out=out)
    logger.log({"val-core/reasonrl/arithmetic/acc/mean@1": 0.5}, 0)
    logger.log(step_metrics(0.25), 1)
    display.poll()
    logger.log(step_metrics(0.5, seconds=4.0), 2)
    display.poll()
    display.poll()  # nothing new: nothing printed twice
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert "step 0/4" in lines[0] and "val 0.500" in lines[0] and "reward" not in lines[0]
    assert (
        "step 1/4" in lines[1] and "reward 0.250" in lines[1] and "loss -0.0100" in lines[1] and "len 3.0" in lines[1]
    )
    assert "step 2/4" in lines[2] and "|██████████          |" in lines[2]
    assert "eta 6s" in lines[2], "eta = median step time (3 s) x 2 steps left"
    assert sorted(display.record.training_steps()) == [1, 2] and display.record.finite_rewards()


def test_a_half_written_line_waits_for_its_end(tmp_path):
    path, out = tmp_path / "metrics.jsonl", io.StringIO()
    path.write_bytes(b'{"step": 1, "data": {"critic/score/mean": 0.1}}\n{"step": 2, "da')
    display = ProgressDisplay(path, total_steps=2, out=out)
    display.poll()
    assert list(display.record.steps) == [1]
    with path.open("ab") as stream:
        stream.write(b'ta": {"critic/score/mean": 0.2}}\n')
    display.poll()
    assert list(display.record.steps) == [1, 2] and display.record.steps[2]["critic/score/mean"] == 0.2


def test_nan_reward_is_not_finite(tmp_path):
    path = tmp_path / "metrics.jsonl"
    logger = verl_file_logger(path)
    logger.log(step_metrics(float("nan")), 1)
    display = ProgressDisplay(path, total_steps=1, out=io.StringIO())
    display.poll()
    assert not display.record.finite_rewards()


def test_summary_names_steps_rewards_validation_and_checkpoint(tmp_path):
    path = tmp_path / "metrics" / "launch.jsonl"
    path.parent.mkdir()
    logger = verl_file_logger(path)
    logger.log({"val-core/src/acc/mean@1": 0.4}, 0)
    for step in range(1, 11):
        logger.log(step_metrics(step / 10), step)
    logger.log({"val-core/src/acc/mean@1": 0.7}, 10)
    (tmp_path / "global_step_10").mkdir()
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("10")
    display = ProgressDisplay(path, total_steps=10, out=io.StringIO())
    display.poll()
    text = "\n".join(summary_lines(display.record, tmp_path, "finished"))
    assert "1 -> 10 (10 in this launch, 10 configured)" in text
    assert "0.300 -> 0.800" in text, "means of the first and last five steps"
    assert "0.400 (step 0) -> 0.700 (step 10)" in text
    assert str(tmp_path / "global_step_10") in text and latest_checkpoint(tmp_path) == tmp_path / "global_step_10"


def test_validation_score_reads_verls_core_metric():
    assert validation_score({"val-aux/x/reward/mean@1": 0.1, "val-core/x/acc/mean@1": 0.9}) == 0.9
    assert validation_score({"critic/score/mean": 0.3}) is None


def test_summary_flags_a_non_finite_reward(tmp_path):
    path = tmp_path / "metrics.jsonl"
    logger = verl_file_logger(path)
    logger.log(step_metrics(0.5), 1)
    logger.log(step_metrics(float("nan")), 2)
    display = ProgressDisplay(path, total_steps=2, out=io.StringIO())
    display.poll()
    text = "\n".join(summary_lines(display.record, tmp_path, "finished"))
    assert "NOT FINITE        reward at steps [2]" in text and "0.500 -> 0.500" in text
