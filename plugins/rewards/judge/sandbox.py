"""One bubblewrap sandbox hosting a warm runner (``zygote.py``), driven over two pipes.

Namespaces (bubblewrap): new PID, network (no interfaces but a down loopback), IPC, UTS and
cgroup namespaces; the host's filesystem mounted read-only; a fresh size-limited tmpfs at
``/tmp`` (the only writable place); a minimal ``/dev``; a new session (no terminal).
Unprivileged host: bubblewrap also creates a user namespace, and nested user namespaces
are disabled. Root host: bubblewrap runs privileged and the runner is started through
``setpriv`` as an unprivileged uid (``60000 + slot``) with no capabilities and
``no_new_privs``, so RLIMIT_NPROC applies and every slot has its own uid.
Directories on the interpreter's path that the runner's uid could not traverse (e.g. a
``/root/.pyenv`` Python) are covered by an empty tmpfs and only the needed tree is bound.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import sysconfig
import threading

from reasonrl.plugins.rewards.judge import zygote

ZYGOTE_PATH = os.path.abspath(zygote.__file__)
SANDBOX_UID_BASE = 60000


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing, or the sandbox could not start here."""


def _needed_trees() -> list[str]:
    """Directories the runner must read: the interpreter, its stdlib and site-packages, the zygote."""
    paths = {os.path.realpath(sys.executable), os.path.dirname(ZYGOTE_PATH)}
    paths.update(os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix))
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        paths.add(os.path.realpath(sysconfig.get_paths()[key]))
    paths.update(os.path.realpath(p) for p in sys.path if p and os.path.isdir(p))
    return sorted(paths)


def _hidden_ancestors(path: str) -> tuple[str | None, str]:
    """The highest ancestor of ``path`` that others cannot traverse, and the tree to bind under it."""
    parts = path.strip("/").split("/")
    for depth in range(1, len(parts) + 1):
        ancestor = "/" + "/".join(parts[:depth])
        if not os.stat(ancestor).st_mode & 0o001:
            return ancestor, "/" + "/".join(parts[: depth + 1]) if depth < len(parts) else ancestor
    return None, path


def bubblewrap_command(slot: int, tmp_size_mb: int) -> list[str]:
    """The full command line that starts the runner of worker ``slot`` in its sandbox."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed: apt-get install bubblewrap (scripts/setup_env.sh does it)"
        )
    as_root = os.geteuid() == 0
    command = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not as_root:
        command += ["--unshare-user", "--disable-userns"]
    command += ["--die-with-parent", "--as-pid-1", "--new-session", "--ro-bind", "/", "/"]
    needed = _needed_trees()
    covered: set[str] = set()
    if as_root:  # the runner's uid must reach the interpreter through directories like /root (0700)
        for tree in needed:
            hidden, bind = _hidden_ancestors(tree)
            if hidden is None or bind in covered:
                continue
            if hidden not in covered:
                command += ["--tmpfs", hidden]
                covered.add(hidden)
            command += ["--ro-bind", bind, bind]
            covered.add(bind)
    command += ["--perms", "1777", "--size", str(tmp_size_mb << 20), "--tmpfs", "/tmp"]
    # the fresh /tmp hides whatever of the runner lives under the host's /tmp (a checkout, a venv)
    bound_under_tmp: list[str] = []
    for tree in (t for t in needed if t.startswith("/tmp/")):  # sorted: parents first
        if not any(tree == b or tree.startswith(b + "/") for b in bound_under_tmp):
            command += ["--ro-bind", tree, tree]
            bound_under_tmp.append(tree)
    command += [
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        "--chdir",
        "/tmp",
    ]
    if as_root:
        uid = str(SANDBOX_UID_BASE + slot)
        command += [
            "/usr/bin/setpriv",
            "--reuid",
            uid,
            "--regid",
            uid,
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
        ]
    # -S: no site.py and .pth processing (a leaner runner forks faster); the runner puts the
    # site-packages directories on sys.path itself, so programs can still import numpy etc.
    command += [sys.executable, "-I", "-S", "-B", ZYGOTE_PATH, "/tmp/judge", os.pathsep.join(_site_packages())]
    return command  # + the two pipe fds, appended by Sandbox


def _site_packages() -> list[str]:
    import site

    return [p for p in site.getsitepackages() if os.path.isdir(p)]


class Sandbox:
    """A running sandbox; ``run(request)`` is synchronous and thread-safe (one request at a time).

    If the runner dies or stops answering within ``request_timeout`` seconds, the call raises
    :class:`SandboxFailure` (the caller reports ``judge_error``) and the next call starts a new one.
    """

    def __init__(self, slot: int = 0, tmp_size_mb: int = 256):
        self.slot, self.tmp_size_mb = slot, tmp_size_mb
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None

    def _start(self) -> None:
        request_read, request_write = os.pipe()
        response_read, response_write = os.pipe()
        command = bubblewrap_command(self.slot, self.tmp_size_mb) + [str(request_read), str(response_write)]
        try:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(request_read, response_write),
                close_fds=True,
            )
        finally:
            os.close(request_read)
            os.close(response_write)
        self._request_fd, self._response_fd = request_write, response_read
        ready = self._receive(timeout=30)
        if not ready or not ready.get("ready"):
            stderr = self._stop()
            raise SandboxUnavailable(f"the sandbox did not start: {stderr.strip()[-2000:] or 'no message'}")

    def _receive(self, timeout: float) -> dict | None:
        if not select.select([self._response_fd], [], [], timeout)[0]:
            return None
        try:
            return zygote.recv_message(self._response_fd)
        except (OSError, ValueError):
            return None

    def _stop(self) -> str:
        process, self._process = self._process, None
        if process is None:
            return ""
        for fd in (self._request_fd, self._response_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        process.kill()
        try:
            _, stderr = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            stderr = b""
        return (stderr or b"").decode("utf-8", "replace")

    def run(self, request: dict, request_timeout: float) -> dict:
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._stop()
                self._start()
            try:
                zygote.send_message(self._request_fd, request)
                response = self._receive(request_timeout)
            except OSError:
                response = None
            if response is None:
                stderr = self._stop()
                raise SandboxFailure(f"the sandbox runner stopped answering ({stderr.strip()[-500:] or 'no message'})")
            return response

    def close(self) -> None:
        with self._lock:
            self._stop()


class SandboxFailure(RuntimeError):
    """The runner crashed or hung: an infrastructure failure, reported as ``judge_error``."""
