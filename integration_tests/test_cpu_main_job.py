"""The CPU main job end to end: ``reasonrl train recipe=<r> +preset=cpu_tiny`` through verl's
own trainer, a local Ray cluster and vLLM's CPU build as the rollout replica.

Each launch is a real ``reasonrl train`` process (about a minute to start Ray, the FSDP
trainer and vLLM on two cores, then ~3 s per step). What is checked: the configured steps
finish with finite rewards; vLLM generates with the trainer's weights (it starts from
random weights, ``load_format: dummy``, so matching log-probs prove every weight sync);
checkpoints are written and a second launch resumes after the last one; Ctrl-C leaves no
Ray or vLLM process behind; every recipe runs the preset.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

RECIPES = ["mimo", "kimi_k15", "longcat", "nemotron"]
LAUNCH_TIMEOUT = 900


def reasonrl_command() -> list[str]:
    return [sys.executable, "-m", "reasonrl.cli.main"]


def train_args(recipe: str, run_dir: Path, *overrides: str) -> list[str]:
    return [*reasonrl_command(), "train", f"recipe={recipe}", "+preset=cpu_tiny", f"trainer.default_local_dir={run_dir}", *overrides]


def tagged_env(tag: str) -> dict[str, str]:
    """The environment of a launch, marked so that every process it starts can be found:
    Ray's raylet inherits the driver's environment and passes it to its workers, which pass
    it to vLLM's engine processes."""
    return {**os.environ, "REASONRL_TEST_RUN_TAG": tag, "PYTHONUNBUFFERED": "1"}


def processes_with_tag(tag: str) -> list[str]:
    """``pid command`` of every live process whose environment carries ``tag``."""
    found = []
    marker = f"REASONRL_TEST_RUN_TAG={tag}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120]
                state = next((line for line in (entry / "status").read_text().splitlines() if line.startswith("State:")), "")
                if "zombie" not in state:
                    found.append(f"{entry.name} {command}")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return found


def kill_tagged(tag: str) -> None:
    for line in processes_with_tag(tag):
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def run_tag():
    """A fresh tag per test; whatever still carries it at the end is killed (after the
    assertions about leftovers have been made)."""
    tag = uuid.uuid4().hex
    yield tag
    kill_tagged(tag)


def launch_metrics(run_dir: Path) -> list[dict[int, dict]]:
    """Per launch (oldest first): ``{step: metrics}`` from its own metrics file."""
    files = sorted((run_dir / "metrics").glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
    launches = []
    for path in files:
        steps: dict[int, dict] = {}
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                steps.setdefault(record["step"], {}).update(record["data"])
        launches.append(steps)
    return launches


def trained_steps(steps: dict[int, dict]) -> dict[int, dict]:
    return {step: m for step, m in steps.items() if "critic/score/mean" in m}


def run_to_end(args: list[str], tag: str, log: Path) -> subprocess.CompletedProcess:
    with log.open("w") as out:
        result = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, env=tagged_env(tag), timeout=LAUNCH_TIMEOUT, start_new_session=True)
    return result


def tail(log: Path, lines: int = 60) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def assert_steps_trained(steps: dict[int, dict], expected: range, log: Path) -> None:
    trained = trained_steps(steps)
    assert sorted(trained) == list(expected), f"steps {sorted(trained)} instead of {list(expected)}\n{tail(log)}"
    for step, metrics in trained.items():
        reward = metrics["critic/score/mean"]
        assert isinstance(reward, (int, float)) and math.isfinite(reward) and 0.0 <= reward <= 1.0, f"step {step}: reward {reward}"
        assert math.isfinite(metrics["actor/pg_loss"]), f"step {step}: loss {metrics['actor/pg_loss']}"
        # vLLM started from random weights (load_format: dummy): its sampling log-probs
        # agree with the trainer's only if the trainer's weights reached it this step.
        assert metrics["training/rollout_probs_diff_mean"] < 0.05, f"step {step}: vLLM does not generate with the trainer's weights"


def test_main_job_runs_three_steps_checkpoints_and_plots(tmp_path, run_tag):
    run_dir, log = tmp_path / "run", tmp_path / "train.log"
    result = run_to_end(train_args("mimo", run_dir, "trainer.total_training_steps=3"), run_tag, log)
    assert result.returncode == 0, tail(log)
    (steps,) = launch_metrics(run_dir)
    assert_steps_trained(steps, range(1, 4), log)
    assert any(key.startswith("val-core/") for key in steps.get(0, {})), "validation before training is logged"
    assert (run_dir / "latest_checkpointed_iteration.txt").read_text().strip() == "3"
    assert (run_dir / "global_step_3" / "actor").is_dir()
    text = log.read_text()
    assert "[reasonrl] step 3/3" in text and "[reasonrl] finished" in text, "progress lines and the final summary are printed"
    assert not processes_with_tag(run_tag), "a finished run leaves no process behind"
    plot = subprocess.run([*reasonrl_command(), "plot", str(run_dir)], capture_output=True, text=True, timeout=120)
    assert plot.returncode == 0, plot.stderr
    assert Path(plot.stdout.strip()).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("recipe", [r for r in RECIPES if r != "mimo"])  # mimo: the three-step test
def test_every_recipe_trains_one_step_on_the_cpu_preset(tmp_path, run_tag, recipe):
    run_dir, log = tmp_path / "run", tmp_path / "train.log"
    overrides = ["trainer.total_training_steps=1", "trainer.val_before_train=false", "trainer.test_freq=-1"]
    result = run_to_end(train_args(recipe, run_dir, *overrides), run_tag, log)
    assert result.returncode == 0, tail(log)
    (steps,) = launch_metrics(run_dir)
    assert_steps_trained(steps, range(1, 2), log)


def wait_for_checkpoint(run_dir: Path, process: subprocess.Popen, log: Path, timeout: float = LAUNCH_TIMEOUT) -> int:
    tracker = run_dir / "latest_checkpointed_iteration.txt"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the run ended before its first checkpoint\n{tail(log)}"
        if tracker.exists() and tracker.read_text().strip():
            return int(tracker.read_text())
        time.sleep(0.5)
    raise AssertionError(f"no checkpoint within {timeout} s\n{tail(log)}")


def test_ctrl_c_leaves_no_process_and_the_next_launch_resumes(tmp_path, run_tag):
    run_dir, log = tmp_path / "run", tmp_path / "first.log"
    total = 6
    args = train_args("mimo", run_dir, f"trainer.total_training_steps={total}", "trainer.val_before_train=false", "trainer.test_freq=-1")
    with log.open("w") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=tagged_env(run_tag), start_new_session=True)
        try:
            wait_for_checkpoint(run_dir, process, log)
            # Ctrl-C in a terminal: SIGINT to the whole foreground process group.
            os.killpg(process.pid, signal.SIGINT)
            process.wait(timeout=120)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode != 0, "an interrupted run must not report success"
    assert "[reasonrl] interrupted" in log.read_text(), tail(log)
    deadline = time.monotonic() + 30
    while processes_with_tag(run_tag) and time.monotonic() < deadline:
        time.sleep(1)
    assert not processes_with_tag(run_tag), "left behind after Ctrl-C:\n" + "\n".join(processes_with_tag(run_tag))

    saved = int((run_dir / "latest_checkpointed_iteration.txt").read_text())
    assert 1 <= saved < total, f"interrupted after step {saved} of {total}: too late to test a resume"
    resume_log = tmp_path / "resume.log"
    result = run_to_end(args, run_tag, resume_log)
    assert result.returncode == 0, tail(resume_log)
    first_launch, resumed = launch_metrics(run_dir)
    assert_steps_trained(resumed, range(saved + 1, total + 1), resume_log)
    assert max(trained_steps(first_launch)) >= saved
    assert (run_dir / "latest_checkpointed_iteration.txt").read_text().strip() == str(total)
