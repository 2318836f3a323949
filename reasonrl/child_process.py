"""Running a long child command (``reasonrl train``, a trainer under torchrun) from a driver that
the user may stop with Ctrl-C."""

from __future__ import annotations

import subprocess


def run_through_ctrl_c(args: list[str], out, env: dict | None = None, cwd=None) -> int:
    """The child's exit code, its output to ``out``. Ctrl-C reaches the child too (same process
    group): it stops its own Ray cluster and vLLM and saves nothing half-written, so this waits for
    it rather than killing it (``subprocess.run`` sends SIGKILL 0.25 s after the interrupt), then
    re-raises the KeyboardInterrupt; the child is killed only if it has not stopped in 300 s."""
    process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    try:
        return process.wait()
    except KeyboardInterrupt:
        try:
            process.wait(timeout=300)
        finally:
            if process.poll() is None:
                process.kill()
        raise
