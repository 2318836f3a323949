"""Helpers for tests that launch ``reasonrl train`` on the CPU preset and read what verl
logged: launch with a tagged environment (every process the run starts can be found and
killed), read each launch's metrics file, and check trained steps.

Used by reasonrl's integration tests; plugin authors can use them for their own
end-to-end CPU tests (``reasonrl train ... +preset=cpu_tiny``).
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from reasonrl.plotting import metric_files, read_metrics_file
from reasonrl.progress import training_steps
from reasonrl.state_io import digest, load_state

LAUNCH_TIMEOUT = 900


def reasonrl_command() -> list[str]:
    return [sys.executable, "-m", "reasonrl.cli.main"]


def train_args(recipe: str, run_dir: Path, *overrides: str) -> list[str]:
    return [
        *reasonrl_command(),
        "train",
        f"recipe={recipe}",
        "+preset=cpu_tiny",
        f"trainer.default_local_dir={run_dir}",
        *overrides,
    ]


def tagged_env(tag: str) -> dict[str, str]:
    """The environment of a launch, marked so that every process it starts can be found:
    Ray's raylet inherits the driver's environment and passes it to its workers, which pass
    it to vLLM's engine processes. verl's console output stays on (``REASONRL_VERL_CONSOLE``)."""
    # verl's own console (the tests read what verl and the workers print from the launch's output)
    return {**os.environ, "REASONRL_TEST_RUN_TAG": tag, "PYTHONUNBUFFERED": "1", "REASONRL_VERL_CONSOLE": "1"}


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
                state = next(
                    (line for line in (entry / "status").read_text().splitlines() if line.startswith("State:")), ""
                )
                if "zombie" not in state:
                    found.append(f"{entry.name} {command}")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return found


def assert_no_process_left(tag: str, what: str, grace: float = 30) -> None:
    """No process of the launch ``tag`` is alive: Ray stops its workers asynchronously once the
    driver has shut it down, so they get ``grace`` seconds."""
    deadline = time.monotonic() + grace
    while processes_with_tag(tag) and time.monotonic() < deadline:
        time.sleep(1)
    assert not processes_with_tag(tag), f"{what}:\n" + "\n".join(processes_with_tag(tag))


def kill_tagged(tag: str) -> None:
    for line in processes_with_tag(tag):
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass


def launch_metrics(run_dir: Path) -> list[dict[int, dict]]:
    """Per launch (oldest first): ``{step: metrics}`` from its own metrics file."""
    return [read_metrics_file(path) for path in metric_files(run_dir)]


def run_to_end(args: list[str], tag: str, log: Path) -> subprocess.CompletedProcess:
    with log.open("w") as out:
        result = subprocess.run(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=tagged_env(tag),
            timeout=LAUNCH_TIMEOUT,
            start_new_session=True,
        )
    return result


def tail(log: Path, lines: int = 60) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def assert_steps_trained(
    steps: dict[int, dict], expected: range, log: Path, reward_range: tuple[float, float] = (0.0, 1.0)
) -> None:
    """The expected steps trained, each with a finite mean reward in ``reward_range`` (a 0/1 task
    reward by default; plus the format reward, up to 2, in nemotron; minus Kimi's length penalty)."""
    trained = training_steps(steps)
    assert sorted(trained) == list(expected), f"steps {sorted(trained)} instead of {list(expected)}\n{tail(log)}"
    low, high = reward_range
    for step, metrics in trained.items():
        reward = metrics["critic/score/mean"]
        assert isinstance(reward, (int, float)) and math.isfinite(reward) and low <= reward <= high, (
            f"step {step}: reward {reward} outside {reward_range}"
        )
        assert math.isfinite(metrics["actor/pg_loss"]), f"step {step}: loss {metrics['actor/pg_loss']}"
        # vLLM started from random weights (load_format: dummy): its sampling log-probs
        # agree with the trainer's only if the trainer's weights reached it this step.
        assert metrics["training/rollout_probs_diff_mean"] < 0.05, (
            f"step {step}: vLLM does not generate with the trainer's weights"
        )


def wait_for_checkpoint(run_dir: Path, process: subprocess.Popen, log: Path, timeout: float = LAUNCH_TIMEOUT) -> int:
    tracker = run_dir / "latest_checkpointed_iteration.txt"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the run ended before its first checkpoint\n{tail(log)}"
        if tracker.exists() and tracker.read_text().strip():
            return int(tracker.read_text())
        time.sleep(0.1)  # Ctrl-C soon after the checkpoint: the next step may take a second
    raise AssertionError(f"no checkpoint within {timeout} s\n{tail(log)}")


def interrupt_after_first_checkpoint(
    args: list[str], run_dir: Path, log: Path, run_tag: str, total: int, run_log: Path | None = None
) -> int:
    """Launch, press Ctrl-C once a checkpoint exists in ``run_dir``, check that nothing is left
    behind; the step of the last checkpoint (before the run's end). ``run_log``: where the
    training run writes (the launch's own ``log`` by default; a pipeline's stage log)."""
    with log.open("w") as out:
        # a terminal's foreground job has SIGINT's default action; a test runner started in the
        # background (`cmd &` in a non-interactive shell) passes SIGINT *ignored* to its children,
        # and Python then never raises KeyboardInterrupt — restore the terminal's setting
        process = subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=tagged_env(run_tag),
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        try:
            wait_for_checkpoint(run_dir, process, log)
            # Ctrl-C in a terminal: SIGINT to the whole foreground process group.
            os.killpg(process.pid, signal.SIGINT)
            process.wait(timeout=120)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode != 0, "an interrupted run must not report success"
    run_log = run_log or log
    assert "[reasonrl] interrupted" in run_log.read_text(), tail(run_log)
    assert_no_process_left(run_tag, "left behind after Ctrl-C")

    saved = int((run_dir / "latest_checkpointed_iteration.txt").read_text())
    assert 1 <= saved < total, f"interrupted after step {saved} of {total}: too late to test a resume"
    return saved


def interrupt_and_resume(
    args: list[str], run_dir: Path, tmp_path: Path, run_tag: str, total: int, reward_range=(0.0, 1.0)
) -> tuple[int, dict, dict, Path]:
    """Ctrl-C after the first checkpoint (``first.log``), then the same command again to the end
    (``resume.log``), which trains the remaining steps: (saved step, first launch's metrics,
    resumed launch's metrics, the resume log)."""
    saved = interrupt_after_first_checkpoint(args, run_dir, tmp_path / "first.log", run_tag, total)
    resume_log = tmp_path / "resume.log"
    result = run_to_end(args, run_tag, resume_log)
    assert result.returncode == 0, tail(resume_log)
    first_launch, resumed = launch_metrics(run_dir)
    assert_steps_trained(resumed, range(saved + 1, total + 1), resume_log, reward_range)
    return saved, first_launch, resumed, resume_log


def assert_state_restored(callback: str, run_dir: Path, saved: int, resume_log: Path) -> dict:
    """The resumed launch restored the callback's state from the last checkpoint, byte for byte."""
    pattern = rf"\[reasonrl\] {callback}: state restored from (\S+) \(sha256 (\w+)\)"
    restored = re.search(pattern, resume_log.read_text())
    assert restored, tail(resume_log)
    path, restored_digest = restored.groups()
    assert Path(path) == run_dir / f"global_step_{saved}" / "reasonrl" / f"{callback}.npz"
    state = load_state(path)
    assert digest(state) == restored_digest
    return state
