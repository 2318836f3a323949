"""``reasonrl bench overhead``: what installing reasonrl costs a verl user (issue 48).

Table (a): ``python -c "import verl"`` in fresh processes without reasonrl's bridge
(``VERL_USE_EXTERNAL_PLUGINS=none``) and with it, min / median / max over ``--repeats`` runs of
each (interleaved, so that the machine's load falls on both alike), and the modules the bridge
adds. verl imports the bridge in every process that imports verl (driver, TaskRunner, every
worker and actor); target: medians within 0.2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

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


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per setting (default 5)")


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
    return 0


BENCHMARK = CliCommand(
    "overhead", "what reasonrl costs a verl user: import verl with and without reasonrl's bridge", _configure, _run
)
