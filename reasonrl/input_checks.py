"""Checks of a command's inputs before any model loads: each bad one raises :class:`UserError` naming
the option (``reasonrl <command>`` prints it and exits 2). Shared by the plugins' commands."""

from __future__ import annotations

from pathlib import Path

from reasonrl.errors import UserError


def check_checkpoint(path: Path, option: str) -> None:
    """``path`` is a Hugging Face checkpoint folder (config.json), else UserError naming it —
    checked before vLLM or a trainer starts."""
    if not path.exists():
        raise UserError(path, f"no such folder ({option}: a Hugging Face checkpoint folder)")
    if not path.is_dir() or not (path / "config.json").is_file():
        raise UserError(path, f"not a Hugging Face checkpoint folder: no config.json ({option})")


def check_numbers(checks: list[tuple[str, object, bool, str]]) -> None:
    """(option, value, ok, allowed): the first not ok raises UserError(option)."""
    for option, value, ok, allowed in checks:
        if not ok:
            raise UserError(option, f"{value}; allowed: {allowed}")
