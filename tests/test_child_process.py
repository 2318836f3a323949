"""Ctrl-C during a long child command: the driver waits for the child's own shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from reasonrl.child_process import run_through_ctrl_c

# On SIGINT the child takes a second to clean up (as `reasonrl train` stops Ray and vLLM), then
# leaves a mark and exits 5.
CHILD = """
import signal, sys, time
def stop(*_):
    time.sleep(1.0)
    open(sys.argv[1], "w").write("cleaned up")
    sys.exit(5)
signal.signal(signal.SIGINT, stop)
print("ready", flush=True)
time.sleep(60)
"""


def test_ctrl_c_waits_for_the_childs_shutdown_then_re_raises(tmp_path):
    mark, log = tmp_path / "mark", tmp_path / "child.log"

    def press_ctrl_c():
        deadline = time.monotonic() + 120
        while "ready" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.05)
        # A terminal sends SIGINT to both at once. The driver first: on a loaded machine this thread
        # can be paused between the two calls for longer than the child's one-second cleanup, and a
        # child signalled first may then have exited before the driver's interrupt arrives.
        child = child_pid()
        for pid in (os.getpid(), child):
            os.kill(pid, signal.SIGINT)

    def child_pid() -> int:
        found = subprocess.run(["pgrep", "-f", str(mark)], capture_output=True, text=True).stdout.split()
        return int(found[0])

    presser = threading.Thread(target=press_ctrl_c)
    # a terminal's driver has Python's Ctrl-C handler; a test runner started in the background
    # (`cmd &` in a non-interactive shell) inherits SIGINT *ignored*, and the interrupt would vanish
    terminal = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with log.open("w") as out:
            presser.start()
            with pytest.raises(KeyboardInterrupt):
                run_through_ctrl_c([sys.executable, "-c", CHILD, str(mark)], out)
        presser.join()
    finally:
        signal.signal(signal.SIGINT, terminal)
    assert mark.read_text() == "cleaned up", "the child was killed before its cleanup"


def test_the_childs_exit_code_without_ctrl_c(tmp_path):
    with (tmp_path / "log").open("w") as out:
        assert run_through_ctrl_c([sys.executable, "-c", "print('hi'); raise SystemExit(3)"], out) == 3
    assert (tmp_path / "log").read_text() == "hi\n"
