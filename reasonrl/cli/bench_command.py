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
import importlib
import importlib.util
import os
import sys
from pathlib import Path

from reasonrl.contracts import CliCommand
from reasonrl.errors import UserError
from reasonrl.manager import call_each

#: a checkout's ``benchmarks/`` folder, for an install that is not an editable one of that checkout
BENCHMARKS_ENV = "REASONRL_BENCHMARKS"
NOT_IN_CHECKOUT = (
    "the built-in benchmarks are not installed with reasonrl: they run from a source checkout "
    "(its benchmarks/ folder, found beside reasonrl/ after `pip install -e .`, "
    f"or named by ${BENCHMARKS_ENV}=<checkout>/benchmarks)"
)


def benchmarks_folder() -> Path | None:
    """The checkout's ``benchmarks/`` folder: ``$REASONRL_BENCHMARKS``, else the one beside the
    folder of the imported ``reasonrl`` package (an editable install); None outside a checkout."""
    named = os.environ.get(BENCHMARKS_ENV)
    if named:
        folder = Path(named).expanduser().resolve()
    else:
        import reasonrl

        folder = Path(reasonrl.__file__).resolve().parent.parent / "benchmarks"
    return folder if folder.name == "benchmarks" and (folder / "__init__.py").is_file() else None


def _import_benchmarks(folder: Path) -> None:
    """Import ``folder`` as the package ``benchmarks`` (its root is not put on ``sys.path``: the
    checkout's other folders, ``plugins/`` and ``patches/``, must not become importable)."""
    loaded = sys.modules.get("benchmarks")
    if loaded is not None:
        where = getattr(loaded, "__file__", None)
        if where and Path(where).resolve().parent == folder:
            return
        raise ImportError(f"a module 'benchmarks' from {where or loaded!r} is already imported, not {folder}")
    spec = importlib.util.spec_from_file_location(
        "benchmarks", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["benchmarks"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["benchmarks"]
        raise


def checkout_benchmarks(name: str) -> list[CliCommand]:
    """``[benchmarks.<name>.BENCHMARK]`` from the source checkout; ``[]`` outside one (a built-in
    plugin's ``reasonrl_benchmarks`` hook returns this with its own name)."""
    folder = benchmarks_folder()
    if folder is None or not (folder / name / "__init__.py").is_file():
        return []
    _import_benchmarks(folder)
    return [importlib.import_module(f"benchmarks.{name}").BENCHMARK]


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
