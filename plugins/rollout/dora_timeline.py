"""DORA's timeline (LongCat §3.1.1): which policy version each generation replica held over time,
and the versions each trained batch came from — read from ``<run folder>/dora/timeline.jsonl``
(written by ``verl_dora`` and the DORA callback), drawn as a PNG.

``python -m reasonrl.plugins.rollout.dora_timeline <run folder>`` prints the PNG's path.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from reasonrl.plugins.rollout.dora import TIMELINE


def read_timeline(run_dir: Path) -> tuple[list[dict], list[dict]]:
    """``(updates, batches)``: each replica update ``{t, replica, version}`` and each trained batch
    ``{t, step, trained_versions: {version: responses}}`` (by each response's oldest version), in file order (a resumed run appends to the same file)."""
    path = Path(run_dir) / TIMELINE
    if not path.exists():
        raise FileNotFoundError(f"{path}: no DORA timeline (was the run started with +reasonrl/rollout=dora?)")
    updates, batches = [], []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        (batches if "step" in record else updates).append(record)
    return updates, batches


def version_intervals(updates: list[dict], batches: list[dict], end: float) -> list[tuple[int, float, float, int]]:
    """``(replica, start, stop, version)``: how long each replica held each version — until its next
    update or, across a stop and resume, until the last trained batch before the next launch."""
    intervals, open_since = [], {}
    for record in sorted(updates, key=lambda r: r["t"]):
        replica = record["replica"]
        if replica in open_since:
            start, version = open_since[replica]
            stop = record["t"]
            if record.get("launch"):  # the earlier launch ended at its last batch (or its start)
                stop = max((b["t"] for b in batches if start <= b["t"] < record["t"]), default=start)
            intervals.append((replica, start, stop, version))
        open_since[replica] = (record["t"], record["version"])
    for replica, (start, version) in open_since.items():
        intervals.append((replica, start, end, version))
    return sorted(intervals)


def plot_timeline(run_dir: Path, out: Path | None = None) -> Path:
    """Write the timeline PNG (``<run folder>/dora/timeline.png`` by default); return its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    updates, batches = read_timeline(run_dir)
    times = [r["t"] for r in updates + batches]
    origin, end = min(times), max(times)
    intervals = version_intervals(updates, batches, end)
    replicas = sorted({r for r, *_ in intervals})
    versions = sorted({v for *_, v in intervals} | {int(v) for b in batches for v in b["trained_versions"]})
    colours = {v: plt.cm.viridis(i / max(1, len(versions) - 1)) for i, v in enumerate(versions)}
    figure, axis = plt.subplots(figsize=(10, 1.6 + 0.6 * (len(replicas) + 1)))
    for replica, start, stop, version in intervals:
        axis.barh(replica, stop - start, left=start - origin, color=colours[version], edgecolor="white", height=0.6)
        axis.text((start + stop) / 2 - origin, replica, f"v{version}", ha="center", va="center", fontsize=8, color="w")
    trainer_row = len(replicas)
    lines = []
    for batch in batches:  # a tick per trained batch, numbered by its step; what it held below the plot
        axis.plot(batch["t"] - origin, trainer_row, "k|", markersize=14)
        axis.text(batch["t"] - origin, trainer_row + 0.3, str(batch["step"]), ha="center", fontsize=7)
        trained = ", ".join(f"v{v}×{n}" for v, n in batch["trained_versions"].items())
        lines.append(f"step {batch['step']}: {trained}")
    for launch in sorted({round(r["t"], 1) for r in updates if r.get("launch")})[1:]:  # a launch: all replicas at once
        axis.axvline(launch - origin, color="red", linestyle="--", linewidth=1)
        axis.text(launch - origin, trainer_row + 0.55, " resumed", color="red", fontsize=7)
    figure.text(0.01, 0.01, "trained responses by version — " + "; ".join(lines), fontsize=7)
    axis.set_yticks([*replicas, trainer_row], [*(f"replica {r}" for r in replicas), "trainer (batches)"])
    axis.set_ylim(-0.6, trainer_row + 0.9)
    axis.set_xlabel("seconds since the first weight sync")
    axis.set_title("DORA: policy version per generation replica; a tick per trained batch", fontsize=9)
    figure.tight_layout(rect=(0, 0.06, 1, 1))
    out = (Path(run_dir) / TIMELINE).with_suffix(".png") if out is None else Path(out)
    figure.savefig(out, dpi=120)
    plt.close(figure)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="the run's folder (trainer.default_local_dir)")
    parser.add_argument("--out", type=Path, default=None, help="PNG path (default <run>/dora/timeline.png)")
    args = parser.parse_args(argv)
    print(plot_timeline(args.run_dir, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
