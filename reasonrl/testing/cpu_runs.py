"""Helpers for tests that launch ``reasonrl train`` on the CPU preset and read what verl
logged: launch with a tagged environment (every process the run starts can be found and
killed), read each launch's metrics file, and check trained steps.

Used by reasonrl's integration tests; plugin authors can use them for their own
end-to-end CPU tests (``reasonrl train ... +preset=cpu_tiny``).
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
from pathlib import Path

from reasonrl.plotting import metric_files, read_metrics_file
from reasonrl.progress import training_steps

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
                state = next(
                    (line for line in (entry / "status").read_text().splitlines() if line.startswith("State:")), ""
                )
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
