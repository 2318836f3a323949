"""Lift each built-in plugin out alone and report what still works (issue 43).

    .venv/bin/python scripts/plugin_alone.py [--unit-tests] [plugin ...]

For each plugin: a copy of the repository without the other plugins' four folders (keeping the
plugins it declares it requires), installed editable in a fresh venv (``reasonrl.testing.plugin_alone``);
prints whether its modules import, what ``reasonrl plugins`` loads, how many of its options
compose — what ``integration_tests/test_plugin_alone.py`` asserts — and with ``--unit-tests`` the
result of its own unit tests (``plugins/<plugin>/tests``) run in the copy. Prints numbers; asserts
nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reasonrl.manager import call_each
from reasonrl.testing.plugin_alone import CHECK, install, lift_out

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plugins", nargs="*")
    parser.add_argument("--unit-tests", action="store_true", help="also run plugins/<plugin>/tests in the copy")
    args = parser.parse_args()
    groups_of = {name: [] for name, _ in call_each("reasonrl_plugin_info") if name != "patches"}
    requires = {name: set(info.requires) for name, info in call_each("reasonrl_plugin_info")}
    for name, groups in call_each("reasonrl_config_groups"):
        groups_of[name] = [group.name for group in groups]
    print("| plugin | kept | imports | loaded (errors) | options composed | unit tests alone | time |")
    print("|---|---|---|---|---|---|---|")
    for plugin in args.plugins or sorted(groups_of):
        started = time.monotonic()
        keep = {plugin, *requires[plugin]}
        with tempfile.TemporaryDirectory(prefix=f"alone-{plugin}-") as tmp:
            checkout = Path(tmp) / "checkout"
            lift_out(REPO, checkout, keep, groups_of)
            python = install(checkout, Path(tmp) / "venv")
            done = subprocess.run([str(python), "-c", CHECK, plugin], capture_output=True, text=True, cwd=tmp)
            report = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
            tests = "not run"
            if args.unit_tests:
                ran = subprocess.run(
                    [str(python), "-m", "pytest", "-q", "-p", "no:randomly", f"plugins/{plugin}/tests"],
                    capture_output=True,
                    text=True,
                    cwd=checkout,
                )
                tests = (ran.stdout.strip().splitlines() or ["no output"])[-1].strip("= ")
        if report is None:
            print(
                f"| {plugin} | {', '.join(sorted(keep))} | check failed: {done.stderr.strip()[-200:]} | | | {tests} | |"
            )
            continue
        imports = "yes" if not report["import_errors"] else f"no: {sorted(report['import_errors'])}"
        loaded = f"{', '.join(report['plugins'])} ({len(report['load_errors'])})"
        composed = f"{len(report['composed'])}/{len(report['composed']) + len(report['compose_errors'])}"
        elapsed = time.monotonic() - started
        print(
            f"| {plugin} | {', '.join(sorted(keep))} | {imports} | {loaded} | {composed} | {tests} | {elapsed:.0f} s |"
        )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
