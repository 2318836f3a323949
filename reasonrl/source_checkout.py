"""The source checkout's ``benchmarks/`` folder: where the built-in plugins' benchmarks and
simulators live, outside the installed packages (``benchmarks/core``: the core's,
``benchmarks/<plugin>``: each built-in plugin's, returned by that plugin's ``reasonrl_benchmarks``
hook through :func:`checkout_benchmarks`). Found beside the ``reasonrl/`` folder of an editable
install, or where ``$REASONRL_BENCHMARKS`` names it; outside a checkout there are none."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

from reasonrl.contracts import CliCommand

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
    """``benchmarks.<name>.BENCHMARKS`` (or ``[BENCHMARK]``) from the source checkout; ``[]`` outside
    one (a built-in plugin's ``reasonrl_benchmarks`` hook returns this with its own name)."""
    folder = benchmarks_folder()
    if folder is None or not (folder / name / "__init__.py").is_file():
        return []
    _import_benchmarks(folder)
    module = importlib.import_module(f"benchmarks.{name}")
    return list(getattr(module, "BENCHMARKS", None) or [module.BENCHMARK])
