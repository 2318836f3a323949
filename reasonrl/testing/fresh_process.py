"""Run code in a fresh Python process, as a Ray worker or a user's shell would.

Plugin discovery happens once per process (``import verl``, vLLM's plugin loading), so
its tests must start new processes; ``pythonpath`` entries go in front of ``sys.path``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Iterable


def run_fresh(
    args: list[str],
    pythonpath: Iterable[Path] = (),
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: int = 300,
) -> subprocess.CompletedProcess:
    """Run ``args`` with ``pythonpath`` prepended to ``PYTHONPATH``; capture text output."""
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), full_env.get("PYTHONPATH", "")]).strip(os.pathsep)
    return subprocess.run(args, capture_output=True, text=True, env=full_env, timeout=timeout, cwd=cwd)


def python_fresh(
    code: str, pythonpath: Iterable[Path] = (), env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """``python -c code`` in a fresh interpreter (the one running the tests)."""
    return run_fresh([sys.executable, "-c", code], pythonpath, env, cwd)


def reasonrl_fresh(
    args: list[str], pythonpath: Iterable[Path] = (), env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """The ``reasonrl`` CLI in a fresh process (``python -m reasonrl.cli.main``)."""
    return run_fresh([sys.executable, "-m", "reasonrl.cli.main", *args], pythonpath, env, cwd)
