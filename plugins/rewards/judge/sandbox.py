"""One bubblewrap sandbox hosting a warm runner (``zygote.py``), driven over two pipes.

Namespaces (bubblewrap): new PID, network (no interfaces but a down loopback), IPC, UTS and
cgroup namespaces; the host's filesystem mounted read-only; a fresh size-limited tmpfs at
``/tmp`` (the only writable place); a minimal ``/dev``; a new session (no terminal).
Unprivileged host: bubblewrap also creates a user namespace, and nested user namespaces
are disabled. Root host: bubblewrap runs privileged and the runner is started through
``setpriv`` as an unprivileged uid (``60000 + slot``) with no capabilities and
``no_new_privs``, so RLIMIT_NPROC applies and every slot has its own uid.
What the runner needs (the interpreter's installation, the environment's site-packages, the
folder of ``zygote.py``) is bound back read-only at its own path wherever it lives — under
the host's ``/tmp`` (hidden by the fresh one) or below folders the runner's uid cannot
traverse (``/root/.pyenv``, a ``mktemp -d`` folder, at any depth): such a folder of the host
is covered by an empty read-only tmpfs, missing parents are made ``0755``, and only the
needed trees are bound, nothing else of a checkout (``mount_plan``). ``LocalJudge.probe``
runs a known-good program through all of it before any judging.
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

ZYGOTE_PATH = os.path.realpath(zygote.__file__)
SANDBOX_UID_BASE = 60000


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing, or the sandbox could not start here."""


def _executable() -> str:
    """The interpreter the runner starts: its folder resolved, its name kept (a venv's
    ``bin/python`` link must stay one, or the interpreter would not find the venv)."""
    return os.path.join(os.path.realpath(os.path.dirname(sys.executable)), os.path.basename(sys.executable))


def _needed_trees() -> list[str]:
    """What the runner reads: the interpreter's installation, its stdlib and shared library,
    the environment's site-packages, and the folder of ``zygote.py`` — nothing else of a checkout."""
    paths = {os.path.dirname(_executable()), sys.executable, os.path.dirname(ZYGOTE_PATH)}
    paths.update((sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix))
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        paths.add(sysconfig.get_paths()[key])
    paths.add(sysconfig.get_config_var("LIBDIR") or "")
    paths.update(_site_packages())
    return sorted({os.path.realpath(p) for p in paths if p and os.path.exists(p)})


def _traversable(path: str, as_root: bool) -> bool:
    """Whether the runner may enter ``path``. As root the runner is an unrelated uid ("others");
    otherwise bubblewrap maps it onto the caller's uid, which reached the interpreter already."""
    if not as_root:
        return True
    try:
        return bool(os.stat(path).st_mode & 0o001)
    except OSError:
        return False


def _ancestors(path: str) -> list[str]:
    """``/a/b/c`` → ``["/a", "/a/b"]``."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:depth]) for depth in range(1, len(parts))]


def mount_plan(trees: list[str], as_root: bool) -> list[str]:
    """bubblewrap arguments that make each tree readable by the runner, read-only.

    They follow ``--ro-bind / /`` and the fresh ``--tmpfs /tmp``, which hides the host's /tmp:
    a tree under /tmp, or under a folder the runner cannot traverse (``/root``, a ``mktemp -d``
    folder, at any depth), is bound alone at its own path. Its missing parents are made
    ``0755`` (``--perms 0755 --dir``: bubblewrap would make them ``0700``); an untraversable
    folder of the host on the way is covered by an empty read-only tmpfs first; an untraversable
    tree itself becomes a ``0755`` folder with its entries bound one by one.
    """
    args: list[str] = []
    made = {"/tmp"}  # folders of our own (tmpfs or --dir): the host's content below them is hidden
    bound: set[str] = set()  # host paths bound back (below them: the host's view again)
    covers: list[str] = []  # host folders covered by an empty tmpfs, remounted read-only at the end

    def state(path: str) -> str:
        """``made`` (our folder), ``absent`` (below our folder, not made yet) or ``host``."""
        for level in [path, *reversed(_ancestors(path))]:
            if level in bound:
                return "host"
            if level in made:
                return "made" if level == path else "absent"
        return "host"

    def new_folder(path: str, on_host: bool) -> None:
        if on_host:  # a folder of the host's view: cover it
            args.extend(["--perms", "0755", "--tmpfs", path])
            covers.append(path)
        else:  # absent below a folder of ours: make it
            args.extend(["--perms", "0755", "--dir", path])
        made.add(path)

    def bind(path: str, on_host: bool) -> None:
        if os.path.islink(path):
            if not on_host:
                args.extend(["--symlink", os.readlink(path), path])
        elif os.path.isdir(path) and not _traversable(path, as_root):
            new_folder(path, on_host)
            for name in sorted(os.listdir(path)):
                bind(os.path.join(path, name), on_host=False)
        elif not on_host and (os.path.isdir(path) or os.path.isfile(path)):
            args.extend(["--ro-bind", path, path])
            bound.add(path)

    for tree in sorted(set(trees)):  # parents sort first
        if tree in ("/", "/tmp"):
            continue
        for ancestor in _ancestors(tree):
            where = state(ancestor)
            if where == "absent" or (where == "host" and not _traversable(ancestor, as_root)):
                new_folder(ancestor, on_host=where == "host")
        where = state(tree)
        if where != "made":  # made: an entry of a tree bound entry by entry before
            bind(tree, on_host=where == "host")
    for cover in covers:
        args.extend(["--remount-ro", cover])
    return args


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
    # a fresh /tmp hides the host's; what the runner needs of it (a checkout, a venv) is bound back
    command += ["--perms", "1777", "--size", str(tmp_size_mb << 20), "--tmpfs", "/tmp"]
    command += mount_plan(_needed_trees(), as_root)
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
    command += [_executable(), "-I", "-S", "-B", ZYGOTE_PATH, "/tmp/judge", os.pathsep.join(_site_packages())]
    return command  # + the two pipe fds, appended by Sandbox


def _site_packages() -> list[str]:
    import site

    return [os.path.realpath(p) for p in site.getsitepackages() if os.path.isdir(p)]


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
        command = bubblewrap_command(self.slot, self.tmp_size_mb)  # SandboxUnavailable without bwrap
        request_read, request_write = os.pipe()
        response_read, response_write = os.pipe()
        command += [str(request_read), str(response_write)]
        try:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(request_read, response_write),
                close_fds=True,
            )
        except OSError as error:
            os.close(request_write)
            os.close(response_read)
            raise SandboxUnavailable(f"bubblewrap could not be started ({command[0]}): {error}") from error
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
