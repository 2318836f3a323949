"""``reasonrl bench cli``: wall time of the CLI's commands, each in a fresh process.

Targets (issue 24): ``reasonrl --help`` < 1 s, ``reasonrl plugins`` < 3 s. The commands that
import verl (``plugins --check``, ``train … --cfg job``) are timed beside them to show what a
verl import costs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from reasonrl.contracts import CliCommand

COMMANDS = {
    "reasonrl --help": ["--help"],
    "reasonrl train --help": ["train", "--help"],
    "reasonrl plugins": ["plugins"],
    "reasonrl plugins --check": ["plugins", "--check"],
    "reasonrl train recipe=mimo +preset=cpu_tiny --cfg job": [
        "train",
        "recipe=mimo",
        "+preset=cpu_tiny",
        "--cfg",
        "job",
    ],
}
FAST = ("reasonrl --help", "reasonrl train --help", "reasonrl plugins")


def time_command(args: list[str]) -> float:
    """Seconds from start to exit of ``reasonrl <args>`` in a fresh interpreter (output discarded)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "reasonrl.cli.main", *args], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"reasonrl {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return elapsed


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", type=int, default=5, help="runs per fast command (verl-importing ones: 2)")
    parser.add_argument("--fast-only", action="store_true", help="skip the commands that import verl")


def _run(args: argparse.Namespace) -> int:
    print(f"{'command':<58} {'min':>6} {'median':>7} {'max':>6}  (s, {args.repeats} runs; verl-importing: 2)")
    for label, command in COMMANDS.items():
        fast = label in FAST
        if args.fast_only and not fast:
            continue
        times = [time_command(command) for _ in range(args.repeats if fast else 2)]
        print(f"{label:<58} {min(times):6.2f} {statistics.median(times):7.2f} {max(times):6.2f}", flush=True)
    return 0


BENCHMARK = CliCommand(
    "cli", "wall time of reasonrl's commands in fresh processes (--help, plugins, train --cfg job)", _configure, _run
)
