"""``reasonrl train``'s quiet console: the driver's fds 1 and 2 — and so every process it starts —
write to the launch's log; reasonrl's own lines go to the terminal (issue 42.8)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import subprocess, sys
    from pathlib import Path
    from reasonrl.console import QuietConsole

    print("before", flush=True)
    with QuietConsole(Path(sys.argv[1])) as console:
        print("verl's metrics dict", flush=True)
        print("a worker's warning", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-c", "print('a Ray worker, a child process')"], check=True)
        print("[reasonrl] step 1/1", file=console.terminal, flush=True)
        raise_here = len(sys.argv) > 2
        if raise_here:
            print("ValueError: the real error", file=sys.stderr, flush=True)
            lines = console.error_lines()
    print("after", flush=True)
    if raise_here:
        print("ERRORS", lines, flush=True)
    """
)


def test_the_terminal_gets_reasonrls_lines_and_the_log_everything_else(tmp_path):
    log = tmp_path / "logs" / "launch.log"
    done = subprocess.run([sys.executable, "-c", CHILD, str(log), "fail"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    terminal = done.stdout + done.stderr
    assert "before" in done.stdout and "after" in done.stdout  # the fds come back after the block
    assert "[reasonrl] step 1/1" in done.stderr and f"verl's and Ray's output: {log}" in done.stderr
    for quiet in ("verl's metrics dict", "a worker's warning", "a Ray worker, a child process"):
        assert quiet not in terminal
        assert quiet in log.read_text()
    assert "[reasonrl] step 1/1" not in log.read_text()
    assert "ERRORS ['ValueError: the real error']" in done.stdout


def test_verl_console_switch(monkeypatch):
    from reasonrl.console import VERL_CONSOLE_ENV, verl_console

    monkeypatch.delenv(VERL_CONSOLE_ENV, raising=False)
    assert not verl_console()
    monkeypatch.setenv(VERL_CONSOLE_ENV, "1")
    assert verl_console()
