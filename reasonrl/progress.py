"""A progress display for ``reasonrl train``: one short line per step and a final summary.

verl logs every step as one JSON line to its ``file`` logger (``reasonrl train`` gives each
launch its own file, see ``cli/train.py``); this module follows that file from the driver
process, so it shows what verl itself measured and needs no hook inside the trainer. It
also samples the host's memory in use (the whole machine: driver, Ray, trainer, vLLM).
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import psutil

REWARD = "critic/score/mean"
LOSS = "actor/pg_loss"
LENGTH = "response_length/mean"
STEP_TIME = "timing_s/step"
#: verl's validation metrics are ``val-core/<data source>/<reward key>/mean@<n>``.
VALIDATION_PREFIX = "val-core/"

GIB = 1024**3


def validation_score(metrics: dict[str, float]) -> float | None:
    """The first ``val-core/.../reward/mean@…`` (or ``…/acc/mean@…``) value, if any."""
    for key in sorted(metrics):
        if key.startswith(VALIDATION_PREFIX) and ("/reward/mean@" in key or "/acc/mean@" in key):
            return metrics[key]
    return None


def training_steps(steps: dict[int, dict[str, float]]) -> dict[int, dict[str, float]]:
    """Steps that trained (a validation-only record, e.g. step 0, has no reward)."""
    return {step: metrics for step, metrics in steps.items() if REWARD in metrics}


@dataclass
class RunRecord:
    """What one launch saw: per-step metrics and the host memory in use."""

    total_steps: int
    steps: dict[int, dict[str, float]] = field(default_factory=dict)
    memory_before: int = 0
    memory_peak: int = 0
    started: float = field(default_factory=time.monotonic)

    def finite_rewards(self) -> bool:
        """Every trained step's reward is a finite number (verl's logger writes NaN as null)."""
        return all(
            isinstance(m[REWARD], (int, float)) and math.isfinite(m[REWARD]) for m in self.training_steps().values()
        )

    def training_steps(self) -> dict[int, dict[str, float]]:
        return training_steps(self.steps)

    def validation(self) -> dict[int, float]:
        scores = {step: validation_score(metrics) for step, metrics in self.steps.items()}
        return {step: score for step, score in scores.items() if score is not None}


def bar(done: float, total: float, width: int = 20) -> str:
    """``|██████████          |``: ``done`` of ``total`` in ``width`` characters (tqdm's meter, in
    one logged line per step rather than a live bar: verl's Ray workers print to the same console)."""
    from tqdm import tqdm

    return tqdm.format_meter(min(done, total), total or None, 0, bar_format=f"|{{bar:{width}}}|")


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def step_line(step: int, metrics: dict[str, float], record: RunRecord, memory_in_use: int) -> str:
    """``step 12/50 [####......] reward 0.410 val 0.520 loss -0.0130 len 3.1 2.3s eta 1m30s mem 6.1 GiB``

    Fields verl did not log for this step (e.g. the validation-only step 0) are left out.
    """
    total = record.total_steps or "?"
    times = [m[STEP_TIME] for m in record.training_steps().values() if STEP_TIME in m]
    fields = [
        ("reward", metrics.get(REWARD), ".3f"),
        ("val", validation_score(metrics), ".3f"),
        ("loss", metrics.get(LOSS), "+.4f"),
        ("len", metrics.get(LENGTH), ".1f"),
    ]
    parts = [f"step {step:>{len(str(total))}}/{total}", bar(step, record.total_steps or 0)]
    parts += [f"{name} {value:{spec}}" for name, value, spec in fields if value is not None]
    if STEP_TIME in metrics:
        parts.append(f"{metrics[STEP_TIME]:.1f}s")
    if times and record.total_steps:
        parts.append(f"eta {_duration(statistics.median(times) * max(0, record.total_steps - step))}")
    parts.append(f"mem {memory_in_use / GIB:.1f} GiB")
    return "[reasonrl] " + "  ".join(parts)


def summary_lines(record: RunRecord, run_dir: Path, outcome: str) -> list[str]:
    """The end-of-launch summary: steps, reward, validation, time, memory, the last intact checkpoint."""
    trained = record.training_steps()
    not_finite = [
        step for step, m in trained.items() if not (isinstance(m[REWARD], (int, float)) and math.isfinite(m[REWARD]))
    ]
    rewards = [m[REWARD] for step, m in trained.items() if step not in not_finite]
    times = [m[STEP_TIME] for m in trained.values() if STEP_TIME in m]
    head, tail = rewards[: min(5, len(rewards))], rewards[-min(5, len(rewards)) :]
    validation = record.validation()
    lines = [f"[reasonrl] {outcome}: {run_dir}"]
    if trained:
        lines.append(
            f"  steps             {min(trained)} -> {max(trained)} ({len(trained)} in this launch, {record.total_steps} configured)"
        )
        if rewards:
            lines.append(
                f"  train reward      {statistics.mean(head):.3f} -> {statistics.mean(tail):.3f} (mean of the first / last {len(head)} steps)"
            )
        if not_finite:
            lines.append(f"  NOT FINITE        reward at steps {not_finite}")
    else:
        lines.append("  steps             none finished in this launch")
    if validation:
        first, last = min(validation), max(validation)
        lines.append(
            f"  validation        {validation[first]:.3f} (step {first}) -> {validation[last]:.3f} (step {last})"
        )
    if times:
        lines.append(
            f"  time per step     {statistics.median(times):.1f} s median; launch {_duration(time.monotonic() - record.started)}"
        )
    lines.append(
        f"  host memory       peak {record.memory_peak / GIB:.1f} GiB in use ({record.memory_before / GIB:.1f} GiB before the launch)"
    )
    lines.append(f"  last checkpoint   {last_checkpoint_line(run_dir)}")
    lines.append(f"  plot              reasonrl plot {run_dir}")
    return lines


def last_checkpoint_line(run_dir: Path) -> str:
    """The last intact step folder, and the newer one verl's tracker names when that one is
    corrupt (``reasonrl.checkpoints``: its files against its manifest): ``none`` without any."""
    from reasonrl.checkpoints import checkpoint_status

    return checkpoint_status(run_dir).line()


def latest_checkpoint(run_dir: Path) -> Path | None:
    """verl's last saved step folder (``latest_checkpointed_iteration.txt``), if any, intact or not."""
    tracker = Path(run_dir) / "latest_checkpointed_iteration.txt"
    if not tracker.exists():
        return None
    return Path(run_dir) / f"global_step_{tracker.read_text().strip()}"


class ProgressDisplay:
    """Follows verl's metrics file in a background thread and prints each new step."""

    def __init__(self, metrics_path: Path, total_steps: int, out: TextIO = sys.stderr, poll_seconds: float = 0.5):
        self.metrics_path = Path(metrics_path)
        self.out = out
        self.poll_seconds = poll_seconds
        self.record = RunRecord(total_steps=total_steps)
        memory = psutil.virtual_memory()
        self.record.memory_before = self.record.memory_peak = memory.total - memory.available
        self._offset = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="reasonrl-progress", daemon=True)

    def __enter__(self) -> "ProgressDisplay":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.poll()  # the last lines written before the trainer returned

    def _follow(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            self.poll()

    def poll(self) -> None:
        """Read new complete lines, print one line per step, sample memory."""
        memory = psutil.virtual_memory()
        in_use = memory.total - memory.available
        self.record.memory_peak = max(self.record.memory_peak, in_use)
        if not self.metrics_path.exists():
            return
        with self.metrics_path.open("rb") as stream:
            stream.seek(self._offset)
            chunk = stream.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._offset += len(complete)
        for line in complete.splitlines():
            if line.strip():
                entry = json.loads(line)
                step, metrics = int(entry["step"]), entry["data"]
                self.record.steps.setdefault(step, {}).update(metrics)
                print(step_line(step, metrics, self.record, in_use), file=self.out, flush=True)
