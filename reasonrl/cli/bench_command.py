"""``reasonrl bench <name> …``: the benchmarks plugins declare (``reasonrl_benchmarks``).

Benchmarks print numbers; they assert nothing (performance targets are read, not tested).

The built-in ones are not installed: they live in the source checkout's ``benchmarks/`` folder
(``benchmarks/core``: the core's, ``benchmarks/<plugin>``: each built-in plugin's, declared by that
plugin's hook through :func:`checkout_benchmarks`). ``reasonrl bench`` finds the folder beside the
``reasonrl/`` folder of an editable install, or where ``$REASONRL_BENCHMARKS`` names it; outside a
checkout only third-party plugins' benchmarks are listed.
"""

from __future__ import annotations

import argparse
import sys

from reasonrl.contracts import CliCommand
from reasonrl.errors import UserError
from reasonrl.manager import call_each
from reasonrl.source_checkout import (  # noqa: F401  (re-exported for the benchmarks' tests)
    BENCHMARKS_ENV,
    NOT_IN_CHECKOUT,
    benchmarks_folder,
    checkout_benchmarks,
)


def all_benchmarks() -> list[CliCommand]:
    """The core's benchmarks, then every plugin's."""
    return checkout_benchmarks("core") + [b for _plugin, declared in call_each("reasonrl_benchmarks") for b in declared]


def _configure(parser: argparse.ArgumentParser) -> None:
    benchmarks = parser.add_subparsers(dest="benchmark", metavar="<benchmark>")
    for benchmark in all_benchmarks():
        sub = benchmarks.add_parser(benchmark.name, help=benchmark.help, description=benchmark.help)
        benchmark.configure(sub)
        sub.set_defaults(run_benchmark=benchmark.run)
    if benchmarks_folder() is None:
        parser.epilog = NOT_IN_CHECKOUT
        argparse_error = parser.error

        def error(message: str):
            # `reasonrl bench rollout` from a wheel: say where the benchmark is, not "invalid choice"
            if "invalid choice" in message:
                raise UserError("", NOT_IN_CHECKOUT)
            argparse_error(message)

        parser.error = error


def _run(args: argparse.Namespace) -> int:
    if getattr(args, "run_benchmark", None) is None:
        names = [b.name for b in all_benchmarks()]
        if not names:
            raise UserError("", NOT_IN_CHECKOUT)
        print(f"reasonrl bench <benchmark>: one of {', '.join(sorted(names))}")
        if benchmarks_folder() is None:
            print(f"reasonrl bench: {NOT_IN_CHECKOUT}", file=sys.stderr)
        return 0
    return int(args.run_benchmark(args) or 0)


COMMAND = CliCommand(
    name="bench",
    help="run a plugin's benchmark and print its numbers: reasonrl bench <name>",
    configure=_configure,
    run=_run,
)
