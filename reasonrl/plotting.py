"""Per-step training curves from verl's file logger, and ``reasonrl plot <run dir>``.

verl's ``file`` logger writes one JSON line per step (``{"step": s, "data": {metric: v}}``)
and truncates its file when it starts, so ``reasonrl train`` gives every launch its own
file under ``<run dir>/metrics/``; a resumed run's files are merged here by step (a later
launch wins for a repeated step). A missing folder, no metrics or a damaged record is refused
with :class:`reasonrl.errors.UserError` naming the folder or ``file:line``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from reasonrl.contracts import CliCommand
from reasonrl.errors import UserError

REWARD_KEYS = ("critic/score/mean", "critic/rewards/mean")
LENGTH_KEYS = ("response_length/mean",)


def metric_files(run_dir: Path) -> list[Path]:
    folder = Path(run_dir) / "metrics"
    return sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime) if folder.exists() else []


def run_metrics(run_dir: Path) -> dict[int, dict[str, float]]:
    """``{step: metrics}`` of a whole run: its launches' files merged, oldest first (a later launch's
    record of a step wins)."""
    merged: dict[int, dict[str, float]] = {}
    for path in metric_files(run_dir):
        for step, metrics in read_metrics_file(path).items():
            merged.setdefault(step, {}).update(metrics)
    return merged


def read_metrics_file(path: Path) -> dict[int, dict[str, float]]:
    """``{step: {metric: value}}`` of one launch's file (a step's records are merged). A last
    line without its newline (a record being written, or cut by a kill) is left out; any other
    line that is not a ``{"step", "data"}`` record raises UserError(``path:line``)."""
    text = Path(path).read_text()
    lines = text.splitlines()
    steps: dict[int, dict[str, float]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            step, data = int(record["step"]), dict(record["data"])
        except (ValueError, TypeError, KeyError) as error:
            if number == len(lines) and not text.endswith("\n"):
                break  # incomplete last record
            detail = f"missing {error}" if isinstance(error, KeyError) else str(error)
            raise UserError(
                f"{path}:{number}", f'not a metrics record {{"step": s, "data": {{...}}}} ({detail})'
            ) from None
        steps.setdefault(step, {}).update(data)
    return steps


def load_metrics(run_dir: Path) -> dict[int, dict[str, float]]:
    """``{step: {metric: value}}`` over every launch of the run (a later launch wins)."""
    steps: dict[int, dict[str, float]] = {}
    for path in metric_files(run_dir):
        for step, metrics in read_metrics_file(path).items():
            steps.setdefault(step, {}).update(metrics)
    return dict(sorted(steps.items()))


def first_present(metrics: dict[str, float], keys: tuple[str, ...]) -> float | None:
    return next((metrics[k] for k in keys if k in metrics), None)


#: Window of the train-reward moving average drawn over the per-step points.
SMOOTHING = 10


def moving_average(values: list[float], window: int) -> list[float]:
    """Mean of each full window of ``window`` consecutive values."""
    return [sum(values[i - window : i]) / window for i in range(window, len(values) + 1)]


def plot_run(run_dir: Path, out: Path | None = None) -> Path:
    """Write a PNG of reward (train, and greedy validation when logged) and response length
    per step; return its path."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(run_dir, "no such folder" if not run_dir.exists() else "not a folder (give the run's folder)")
    metrics = load_metrics(run_dir)
    if not metrics:
        raise UserError(
            run_dir / "metrics",
            "no metrics records (*.jsonl) here: is this a reasonrl train run folder, and was the 'file' logger on?",
        )
    out = Path(out or run_dir / "training_curves.png")
    if not out.parent.is_dir():
        raise UserError(out, f"its folder {out.parent} does not exist")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reasonrl.progress import validation_score

    figure, (reward_axis, length_axis) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)

    def curve(pick) -> tuple[list[int], list[float]]:
        points = [(step, pick(values)) for step, values in metrics.items()]
        points = [(s, v) for s, v in points if v is not None]
        return [s for s, _ in points], [v for _, v in points]

    reward_steps, rewards = curve(lambda m: first_present(m, REWARD_KEYS))
    reward_axis.plot(
        reward_steps, rewards, marker="o", markersize=2, linewidth=0.8, alpha=0.6, label="train reward (sampled, mean)"
    )
    if len(rewards) >= 2 * SMOOTHING:
        reward_axis.plot(
            reward_steps[SMOOTHING - 1 :],
            moving_average(rewards, SMOOTHING),
            linewidth=2,
            label=f"train reward, mean of {SMOOTHING} steps",
        )
    validation_steps, validation = curve(validation_score)
    if validation:
        reward_axis.plot(
            validation_steps, validation, marker="s", markersize=5, label="validation score (greedy, held-out)"
        )
    reward_axis.set_ylabel("reward")
    reward_axis.legend(loc="best", fontsize=8)
    length_axis.plot(*curve(lambda m: first_present(m, LENGTH_KEYS)), marker="o", markersize=3)
    length_axis.set_ylabel("mean response length (tokens)")
    for axis in (reward_axis, length_axis):
        axis.grid(alpha=0.3)
    length_axis.set_xlabel("training step")
    reward_axis.set_title(f"{Path(run_dir).name}: {len(reward_steps)} training steps")
    figure.tight_layout()
    figure.savefig(out, dpi=120)
    plt.close(figure)
    return out


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, help="the run's folder (trainer.default_local_dir)")
    parser.add_argument("--out", type=Path, default=None, help="PNG path (default <run_dir>/training_curves.png)")


def _run(args: argparse.Namespace) -> int:
    print(plot_run(args.run_dir, args.out))
    return 0


COMMAND = CliCommand(
    name="plot",
    help="plot reward and response length per step of a run: reasonrl plot <run dir>",
    configure=_configure,
    run=_run,
)
