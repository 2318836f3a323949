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

from reasonrl.contracts import CliCommand

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
    records = [json.loads(line) for path in (run_dir / "metrics").glob("*.jsonl") for line in path.open()]
    times = {r["step"]: r["data"]["timing_s/step"] for r in records if "timing_s/step" in r.get("data", {})}
    return [times[s] for s in sorted(times) if s > 1]


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


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per setting (default 5)")
    parser.add_argument(
        "--steps",
        type=int,
        default=0,
        help="also table (b): N timed training steps per trainer mode (~4 min each at 20)",
    )


def _run(args: argparse.Namespace) -> int:
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
    return 0


BENCHMARK = CliCommand(
    "overhead", "what reasonrl costs a verl user: import verl with and without reasonrl's bridge", _configure, _run
)
