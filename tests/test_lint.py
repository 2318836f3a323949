"""The repository is formatted and lint-clean under its own ruff configuration (pyproject.toml):
``ruff format --check`` and ``ruff check`` run here, so every CI run checks them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", [["format", "--check"], ["check"]], ids=["format", "lint"])
def test_ruff(command):
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "."], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
