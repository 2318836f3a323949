"""The prepared GPU check (issue 44): on one GPU, one training step (two, the second timed) of each
recipe on the smoke model through verl + Ray + vLLM's GPU build, then the GPU-stack suite; prints a
table and writes it to ``<out>/gpu_check.md``. Run through ``scripts/gpu_check.sh``.

Each run is the CPU main job's command (``+preset=cpu_tiny``: the smoke model, data and batch
sizes) moved to the GPU: verl's CUDA platform (``VERL_PLATFORM=nvidia``) and ``trainer.device=cuda``.
What it reads back, per recipe, from the run's metrics file: the step time, the mean reward, and
the largest gap between vLLM's and the trainer's token probabilities (verl's
``training/rollout_probs_diff_max``: near 0 when vLLM generated with the trainer's weights).

``--platform cpu`` runs the same commands on the CPU preset unchanged (to check this script here).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RECIPES = ("mimo", "kimi_k15", "longcat", "nemotron")
GPU_OVERRIDES = ("trainer.device=cuda", "ray_kwargs.ray_init.runtime_env.env_vars.VERL_PLATFORM=nvidia")
STEPS = 2  # the first includes warm-up (CUDA graphs off: the preset's enforce_eager); the second is timed
SYNC_KEY = "training/rollout_probs_diff_max"


def train_command(python: str, recipe: str, run_dir: Path, platform: str) -> list[str]:
    command = [python, "-m", "reasonrl.cli.main", "train", f"recipe={recipe}", "+preset=cpu_tiny"]
    command += [f"trainer.default_local_dir={run_dir}", f"trainer.total_training_steps={STEPS}"]
    command += ["trainer.save_freq=-1", "trainer.test_freq=-1", "trainer.val_before_train=false"]
    return command + (list(GPU_OVERRIDES) if platform == "gpu" else [])


def read_steps(run_dir: Path) -> dict[int, dict]:
    """``{step: metrics}`` of the run's training steps (reasonrl's reader of verl's metrics files)."""
    from reasonrl.plotting import run_metrics

    return {step: data for step, data in run_metrics(run_dir).items() if "timing_s/step" in data}


def run_recipe(python: str, recipe: str, out: Path, platform: str) -> dict:
    run_dir = out / recipe
    log = out / f"{recipe}.log"
    start = time.perf_counter()
    with log.open("w") as sink:
        done = subprocess.run(train_command(python, recipe, run_dir, platform), stdout=sink, stderr=subprocess.STDOUT)
    row = {"recipe": recipe, "exit": done.returncode, "wall_s": time.perf_counter() - start, "log": str(log)}
    steps = read_steps(run_dir)
    row["steps"] = len(steps)
    if steps:
        last = steps[max(steps)]
        row["step_s"] = last["timing_s/step"]
        row["reward"] = last.get("critic/rewards/mean", last.get("critic/score/mean"))
        row["probs_diff_max"] = max((s[SYNC_KEY] for s in steps.values() if SYNC_KEY in s), default=None)
    return row


def run_suite(python: str, out: Path, platform: str) -> dict:
    """The GPU-stack suite (integration_tests/gpu_stack: collected only in verl's GPU stack)."""
    target = ["integration_tests/gpu_stack"] if platform == "gpu" else ["tests/test_planning.py"]
    log = out / "suite.log"
    start = time.perf_counter()
    with log.open("w") as sink:
        done = subprocess.run([python, "-m", "pytest", "-q", *target], cwd=REPO, stdout=sink, stderr=subprocess.STDOUT)
    summary = next((line for line in reversed(log.read_text().splitlines()) if " in " in line), "")
    return {
        "suite": " ".join(target),
        "exit": done.returncode,
        "summary": summary.strip("= "),
        "wall_s": time.perf_counter() - start,
    }


def device_line(python: str) -> str:
    code = (
        "import torch, importlib.metadata as m\n"
        "name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no CUDA device'\n"
        "print(name, '|', ', '.join(f'{p} {m.version(p)}' for p in ('torch', 'vllm', 'verl', 'transformers')))"
    )
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return done.stdout.strip() or done.stderr.strip().splitlines()[-1]


def table(device: str, rows: list[dict], suite: dict) -> str:
    def number(value, digits=2):
        return "—" if value is None else f"{value:.{digits}f}"

    lines = [
        f"GPU check: {device}",
        "",
        "| recipe | exit | steps | step 2 (s) | reward mean | max \\|p_vLLM − p_trainer\\| | wall (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['recipe']} | {row['exit']} | {row['steps']}/{STEPS} | {number(row.get('step_s'))} | "
            f"{number(row.get('reward'), 3)} | {number(row.get('probs_diff_max'), 4)} | {row['wall_s']:.0f} |"
        )
    lines += ["", f"suite {suite['suite']}: exit {suite['exit']}, {suite['summary']} ({suite['wall_s']:.0f} s)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="the environment to run in (verl's GPU stack)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--platform", choices=["gpu", "cpu"], default="gpu")
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=RECIPES)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    device = device_line(args.python)
    print(f"[gpu-check] {device}", flush=True)
    rows = []
    for recipe in args.recipes:
        print(f"[gpu-check] {recipe}: {STEPS} steps on the smoke model ...", flush=True)
        rows.append(run_recipe(args.python, recipe, args.out, args.platform))
    print("[gpu-check] the GPU-stack suite ...", flush=True)
    suite = run_suite(args.python, args.out, args.platform)
    text = table(device, rows, suite)
    (args.out / "gpu_check.md").write_text(text + "\n")
    print(text)
    failed = any(row["exit"] != 0 or row["steps"] < STEPS for row in rows) or suite["exit"] != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
