"""``reasonrl bench <name> …``: the benchmarks plugins declare (``reasonrl_benchmarks``).

Benchmarks print numbers; they assert nothing (performance targets are read, not tested).
"""

from __future__ import annotations

import argparse

from reasonrl.contracts import CliCommand
from reasonrl.manager import call_each


def all_benchmarks() -> list[CliCommand]:
    """The core's benchmarks, then every plugin's."""
    from reasonrl.cli import latency_bench

    return [latency_bench.BENCHMARK] + [b for _plugin, declared in call_each("reasonrl_benchmarks") for b in declared]


def _configure(parser: argparse.ArgumentParser) -> None:
    benchmarks = parser.add_subparsers(dest="benchmark", metavar="<benchmark>")
    for benchmark in all_benchmarks():
        sub = benchmarks.add_parser(benchmark.name, help=benchmark.help, description=benchmark.help)
        benchmark.configure(sub)
        sub.set_defaults(run_benchmark=benchmark.run)


def _run(args: argparse.Namespace) -> int:
    if getattr(args, "run_benchmark", None) is None:
        names = [b.name for b in all_benchmarks()]
        print(f"reasonrl bench <benchmark>: one of {', '.join(sorted(names)) or 'none installed'}")
        return 0 if names else 1
    return int(args.run_benchmark(args) or 0)


COMMAND = CliCommand(
    name="bench",
    help="run a plugin's benchmark and print its numbers: reasonrl bench <name>",
    configure=_configure,
    run=_run,
)
