"""The benchmarks and simulators of reasonrl: ``reasonrl bench <name>`` from a source checkout.

They are not part of the installed package (the wheel holds ``reasonrl/``, ``plugins/``,
``patches/`` and ``hydra_configs/`` only). ``reasonrl bench`` finds this folder beside the
``reasonrl/`` folder of an editable install (``pip install -e .``), or where
``$REASONRL_BENCHMARKS`` names it, and imports it as the package ``benchmarks``. Each
``benchmarks/<plugin>/__init__.py`` defines ``BENCHMARK`` (a ``reasonrl.contracts.CliCommand``),
which plugin ``<plugin>`` declares through its ``reasonrl_benchmarks`` hook
(``reasonrl.source_checkout.checkout_benchmarks``); ``core/`` holds the core's own.
"""

from __future__ import annotations

import os
from pathlib import Path

#: the checkout's root: a benchmark that starts ``python -m benchmarks.…`` puts it on PYTHONPATH
ROOT = Path(__file__).resolve().parent.parent


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child process that imports ``benchmarks``: ``ROOT`` first on PYTHONPATH."""
    full = {**os.environ, **(env or {})}
    full["PYTHONPATH"] = os.pathsep.join([str(ROOT), full.get("PYTHONPATH", "")]).strip(os.pathsep)
    return full
