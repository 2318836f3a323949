"""``vllm serve`` of a model as a child process, for commands that ask a model over HTTP
(OpenAI-compatible endpoints: ``reasonrl eval --model``, the judge bench, tests). Float32 and
eager by default, sized for small models on this machine's vLLM (the CPU build here); other
engine arguments pass through ``extra_args``."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

#: what a small model needs from vLLM's CPU build (the default of :func:`serve`)
SMALL_CPU_ARGS = ("--dtype", "float32", "--enforce-eager", "--kv-cache-memory-bytes", str(256 << 20))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve(
    model_dir: Path,
    port: int,
    log_path: Path,
    max_model_len: int = 256,
    max_num_seqs: int = 64,
    extra_args: tuple[str, ...] = SMALL_CPU_ARGS,
) -> subprocess.Popen:
    """Start ``vllm serve``; returns once it answers ``/v1/models`` (at most 600 s). The served
    model's name is ``str(model_dir)``."""
    command = [
        sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", str(model_dir), "--port", str(port),
        "--max-model-len", str(max_model_len), "--max-num-seqs", str(max_num_seqs), "--disable-log-stats", *extra_args,
    ]  # fmt: skip
    log = open(log_path, "w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"vllm serve exited ({server.returncode}); see {log_path}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
            return server
        except OSError:
            time.sleep(1)
    server.kill()
    raise RuntimeError(f"vllm serve did not answer in 600 s; see {log_path}")
