"""The console of ``reasonrl train``: reasonrl's own lines on the terminal, everything else in a log.

verl prints its whole metrics dict every step and Ray forwards every worker's and vLLM engine's
output to the driver: a 3-step CPU run printed 1,273 lines around 5 readable ones. While a launch
runs, :class:`QuietConsole` points the driver's file descriptors 1 and 2 — which Ray's raylet,
workers and engines inherit or are forwarded to — at ``<run dir>/logs/<launch>.log``, and gives
reasonrl's progress display and summary the terminal. ``REASONRL_VERL_CONSOLE=1`` leaves the
console as verl has it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TextIO

VERL_CONSOLE_ENV = "REASONRL_VERL_CONSOLE"


def verl_console() -> bool:
    """Whether the user asked for verl's own console output."""
    return os.environ.get(VERL_CONSOLE_ENV, "") not in ("", "0")


def launch_log_path(run_dir: Path) -> Path:
    return Path(run_dir) / "logs" / (time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}.log")


class QuietConsole:
    """Redirect fds 1 and 2 to ``log`` inside the block; :attr:`terminal` writes to the console."""

    def __init__(self, log: Path):
        self.log = Path(log)
        self.terminal: TextIO = sys.stderr
        self._saved: tuple[int, int] | None = None

    def __enter__(self) -> "QuietConsole":
        self.log.parent.mkdir(parents=True, exist_ok=True)
        sys.stdout.flush()
        sys.stderr.flush()
        self._saved = (os.dup(1), os.dup(2))
        self.terminal = os.fdopen(os.dup(self._saved[1]), "w", buffering=1, encoding="utf-8", errors="replace")
        target = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(target, 1)
        os.dup2(target, 2)
        os.close(target)
        print(
            f"[reasonrl] verl's and Ray's output: {self.log} ({VERL_CONSOLE_ENV}=1 shows it here)", file=self.terminal
        )
        return self

    def __exit__(self, *exc_info) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        if self._saved is not None:
            os.dup2(self._saved[0], 1)
            os.dup2(self._saved[1], 2)
            for fd in self._saved:
                os.close(fd)
            self._saved = None

    def error_lines(self, limit: int = 12) -> list[str]:
        """The last lines of the log that name an error (for the console after a failed launch)."""
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return []
        marked = [
            line
            for line in lines
            if ("Error" in line or "error:" in line or "Traceback" in line) and "Warning:" not in line
        ]
        return marked[-limit:]
