"""``vllm serve`` of a small model on this machine's vLLM (the CPU build here), for tests and
benchmarks that ask a model over HTTP as the product does (OpenAI-compatible endpoints)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve(
    model_dir: Path, port: int, log_path: Path, max_model_len: int = 256, max_num_seqs: int = 64
) -> subprocess.Popen:
    """Start ``vllm serve`` (float32, eager, a 256 MiB KV cache); returns once it answers
    ``/v1/models`` (at most 600 s). The served model's name is ``str(model_dir)``."""
    command = [
        sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", str(model_dir), "--port", str(port),
        "--dtype", "float32", "--enforce-eager", "--max-model-len", str(max_model_len),
        "--max-num-seqs", str(max_num_seqs), "--kv-cache-memory-bytes", str(256 << 20), "--disable-log-stats",
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
