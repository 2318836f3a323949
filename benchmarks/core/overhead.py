"""``reasonrl bench overhead``: what installing reasonrl costs a verl user (issue 48).

Table (a): ``python -c "import verl"`` in fresh processes without reasonrl's bridge
(``VERL_USE_EXTERNAL_PLUGINS=none``) and with it, min / median / max over ``--repeats`` runs of
each (interleaved, so that the machine's load falls on both alike), and the modules the bridge
adds. verl imports the bridge in every process that imports verl (driver, TaskRunner, every
worker and actor); target: medians within 0.2 s.

Table (b) (``--steps N``, N >= 1): the nemotron recipe on the CPU preset with every reasonrl
option off (its rewards and sampling options removed; a plain exact-answer reward,
:func:`exact_answer_score`, as verl's custom reward function), trained N + 1 steps under verl's
trainer mode ``sync`` and under ``reasonrl_sync``; the median of verl's ``timing_s/step`` over
steps 2..N+1 (step 1 warms up). Target: ``reasonrl_sync`` within 3 % of ``sync``.

Table (b2) (``--techniques N``): each recipe of ``--recipes`` on the CPU preset with its own
options on, N + 1 steps (no checkpoints or validation during them); per step (median of steps
2..N+1) the seconds each reasonrl callback spent in its methods (``reasonrl/timing_s/callback/``),
each actor-loss term's forward (``actor/reasonrl/timing_s/loss/``, summed over micro-batches), the
reward manager's scoring (``reward/scoring_s``, summed over responses scored concurrently), beside
verl's own phases and the whole step.

Table (c) (with ``--techniques``, or ``--startup RUN_DIR`` for a run already made): the start-up
of ``reasonrl train`` until the first step begins, split into its parts (``reasonrl.startup_clock``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reasonrl.bridges.verl_actor_loss import LOSS_TIMING
from reasonrl.callbacks import CALLBACK_TIMING
from reasonrl.contracts import CliCommand
from reasonrl.plotting import run_metrics

SETTINGS = {"without reasonrl (VERL_USE_EXTERNAL_PLUGINS=none)": "none", "with reasonrl's bridge (default)": "auto"}
TARGET_S = 0.2


def run_python(code: str, plugins: str) -> tuple[float, str]:
    """Seconds from start to exit of ``python -c code`` in a fresh interpreter, and its output."""
    env = {**os.environ, "VERL_USE_EXTERNAL_PLUGINS": plugins}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"python -c {code!r} exited {done.returncode}: {done.stderr[-2000:]}")
    return elapsed, done.stdout


def modules_added() -> list[str]:
    """The modules ``import verl`` imports with the bridge and not without it."""
    code = "import json, sys, verl\nprint(json.dumps(sorted(sys.modules)))"
    without, with_bridge = (set(json.loads(run_python(code, p)[1].splitlines()[-1])) for p in ("none", "auto"))
    return sorted(with_bridge - without)


STEP_TARGET = 0.03
OPTIONS_OFF = ("~reasonrl/rewards", "~reasonrl/sampling")  # the nemotron recipe's options


def exact_answer_score(data_source, solution_str, ground_truth, extra_info=None, **_unused) -> float:
    """1.0 when the response's last integer is the ground truth (the smoke data's sums), else 0.0."""
    numbers = re.findall(r"-?\d+", solution_str or "")
    return float(bool(numbers) and numbers[-1] == str(ground_truth).strip())


def step_times(trainer_mode: str, steps: int, folder: Path) -> list[float]:
    """verl's ``timing_s/step`` of steps 2..steps+1 of one ``reasonrl train`` launch."""
    run_dir = folder / trainer_mode
    command = [
        *(sys.executable, "-m", "reasonrl.cli.main", "train", "recipe=nemotron", "+preset=cpu_tiny"),
        *OPTIONS_OFF,
        f"trainer.v1.trainer_mode={trainer_mode}",
        f"reward.custom_reward_function.path={Path(__file__).resolve()}",
        "reward.custom_reward_function.name=exact_answer_score",
        f"trainer.default_local_dir={run_dir}",
        f"trainer.total_training_steps={steps + 1}",
        *("trainer.test_freq=-1", "trainer.save_freq=-1", "trainer.val_before_train=false"),
    ]
    log = folder / f"{trainer_mode}.log"
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}; its log: {log}")
    steps = step_records(run_dir)
    return [steps[s][STEP] for s in sorted(steps) if s > 1]


def step_table(steps: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="reasonrl-overhead-"))
    print(f"\n(b) one training step, nemotron on the CPU preset, every reasonrl option off ({steps} steps each)")
    print(f"{'trainer mode':<52} {'min':>6} {'median':>7} {'max':>6}  (s per step)")
    medians = {}
    for mode in ("sync", "reasonrl_sync"):
        measured = step_times(mode, steps, folder)
        medians[mode] = statistics.median(measured)
        print(f"{mode:<52} {min(measured):6.2f} {medians[mode]:7.2f} {max(measured):6.2f}", flush=True)
    ratio = medians["reasonrl_sync"] / medians["sync"] - 1
    verdict = "within" if abs(ratio) <= STEP_TARGET else "OVER"
    print(
        f"{'reasonrl_sync against sync':<52} {ratio:+14.1%}  ({verdict} the {STEP_TARGET:.0%} target; logs in {folder})"
    )


RECIPES = ("mimo", "kimi_k15", "longcat", "nemotron")
#: the rows of table (b2) after reasonrl's callbacks and loss terms: verl's phases
VERL_PHASES = (
    "timing_s/gen",
    "timing_s/old_log_prob",
    "timing_s/adv",
    "timing_s/update_actor",
    "timing_s/update_weights",
)
STEP = "timing_s/step"
SCORING = "reward manager scoring"


def recipe_run(recipe: str, steps: int, folder: Path) -> Path:
    """One ``reasonrl train`` launch of ``recipe`` on the CPU preset, its options on; its run folder."""
    run_dir = folder / recipe
    command = [
        *(sys.executable, "-m", "reasonrl.cli.main", "train", f"recipe={recipe}", "+preset=cpu_tiny"),
        f"trainer.default_local_dir={run_dir}",
        f"trainer.total_training_steps={steps + 1}",
        *("trainer.test_freq=-1", "trainer.save_freq=-1"),
    ]
    log = folder / f"{recipe}.log"
    start = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}; its log: {log}")
    print(f"  {recipe}: {steps + 1} steps in {time.perf_counter() - start:.0f} s (log {log})", flush=True)
    return run_dir


def step_records(run_dir: Path) -> dict[int, dict]:
    """``{step: metrics}`` of a run's training steps, its launches' metrics files merged."""
    return {step: metrics for step, metrics in run_metrics(run_dir).items() if STEP in metrics}


def technique_rows(steps: dict[int, dict]) -> list[tuple[str, float]]:
    """(row, median seconds per step over steps 2..) for reasonrl's timed pieces and verl's phases."""
    timed = [steps[s] for s in sorted(steps) if s > 1]
    keys = sorted({k for step in timed for k in step if k.startswith((CALLBACK_TIMING, LOSS_TIMING))})
    keys += ["reward/scoring_s"] if any("reward/scoring_s" in step for step in timed) else []
    names = {k: k.replace(CALLBACK_TIMING, "callback ").replace(LOSS_TIMING, "loss term ") for k in keys}
    names["reward/scoring_s"] = SCORING + " (summed latency of concurrent responses)"
    rows = [(names[k], statistics.median(step.get(k, 0.0) for step in timed)) for k in keys]
    rows += [(f"verl {k.split('/')[-1]}", statistics.median(step.get(k, 0.0) for step in timed)) for k in VERL_PHASES]
    return rows + [("whole step", statistics.median(step[STEP] for step in timed))]


def print_technique_table(recipe: str, rows: list[tuple[str, float]]) -> None:
    step = rows[-1][1]
    print(f"\n(b2) {recipe} on the CPU preset, its options on: median per step")
    print(f"{'':<56} {'s':>7} {'of step':>8}")
    for name, seconds in rows:
        # the scoring row sums concurrent responses' latencies: no share of the step's wall time
        share = f"{seconds / step:8.1%}" if not name.startswith(SCORING) else f"{'(sum)':>8}"
        print(f"{name:<56} {seconds:7.3f} {share}")


def print_startup_table(records: dict[str, Path]) -> None:
    """Table (c): rows are the start-up's parts in order, one column per launch."""
    from reasonrl.startup_clock import read_parts, until_first_step

    parts = {name: read_parts(path) for name, path in records.items()}
    order: list[str] = []
    for launch in parts.values():
        order += [p.name for p in launch if p.name not in order]
    print("\n(c) start-up of reasonrl train until the first step begins (s; each part ends at its mark)")
    print(f"{'part':<48}" + "".join(f"{name:>12}" for name in parts))
    for row in order:
        cells = [next((p.seconds for p in launch if p.name == row), None) for launch in parts.values()]
        print(f"{row:<48}" + "".join(f"{c:12.1f}" if c is not None else f"{'-':>12}" for c in cells))
    totals = [until_first_step(launch) for launch in parts.values()]
    print(f"{'to the first step':<48}" + "".join(f"{t:12.1f}" if t is not None else f"{'-':>12}" for t in totals))


def techniques_and_startup(recipes: list[str], steps: int) -> None:
    from reasonrl.startup_clock import latest_record

    folder = Path(tempfile.mkdtemp(prefix="reasonrl-techniques-"))
    print(f"\n(b2, c) {len(recipes)} launches of {steps + 1} steps each ({folder}):", flush=True)
    records = {}
    for recipe in recipes:
        run_dir = recipe_run(recipe, steps, folder)
        print_technique_table(recipe, technique_rows(step_records(run_dir)))
        records[recipe] = latest_record(run_dir)
    print_startup_table(records)


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per setting (default 5)")
    parser.add_argument(
        "--steps",
        type=int,
        default=0,
        help="also table (b): N timed training steps per trainer mode (~4 min each at 20)",
    )
    parser.add_argument(
        "--techniques",
        type=int,
        default=0,
        help="also tables (b2) and (c): each recipe with its options on, N timed steps (~2.5 min a recipe at 5)",
    )
    parser.add_argument("--recipes", default=",".join(RECIPES), help="recipes for --techniques (comma-separated)")
    parser.add_argument(
        "--startup", metavar="RUN_DIR", type=Path, help="only table (c), from the newest launch of a run folder"
    )


def _run(args: argparse.Namespace) -> int:
    if args.startup is not None:
        from reasonrl.startup_clock import latest_record

        record = latest_record(args.startup)
        if record is None:
            print(f"{args.startup}: no start-up record (startup/*.jsonl, written by reasonrl train)", file=sys.stderr)
            return 2
        print_startup_table({record.stem: record})
        return 0
    times: dict[str, list[float]] = {label: [] for label in SETTINGS}
    for _ in range(args.repeats):
        for label, plugins in SETTINGS.items():
            times[label].append(run_python("import verl", plugins)[0])
    print(f"(a) import verl, fresh processes ({args.repeats} each, interleaved)")
    print(f"{'':<52} {'min':>6} {'median':>7} {'max':>6}  (s)")
    for label, measured in times.items():
        print(f"{label:<52} {min(measured):6.2f} {statistics.median(measured):7.2f} {max(measured):6.2f}")
    without, with_bridge = (statistics.median(t) for t in times.values())
    verdict = "within" if with_bridge - without <= TARGET_S else "OVER"
    print(f"{'difference of the medians':<52} {with_bridge - without:+14.2f}  ({verdict} the {TARGET_S} s target)")
    added = modules_added()
    own = [m for m in added if m.startswith("reasonrl")]
    others = sorted({m.split(".")[0] for m in added if not m.startswith("reasonrl")})
    print(f"modules the bridge adds: {len(added)} ({len(own)} reasonrl's own; others: {', '.join(others) or 'none'})")
    if args.steps > 0:
        step_table(args.steps)
    if args.techniques > 0:
        techniques_and_startup(args.recipes.split(","), args.techniques)
    return 0


BENCHMARK = CliCommand(
    "overhead",
    "what reasonrl costs a verl user: import verl with and without its bridge, per step, per technique, start-up",
    _configure,
    _run,
)
