"""The judge's warm runner: runs inside a bubblewrap sandbox as its PID 1 (stdlib only).

The host starts it once per worker slot (``sandbox.py``) as ``zygote.py SCRATCH
SITE_PACKAGES IN_FD OUT_FD`` and sends it one request per solution over IN_FD, reading the
answer from OUT_FD (4-byte big-endian length + JSON). C++ is compiled once per solution
(g++, in a child); then the runner forks one child per test. A child gets its own
session/process group, rlimits (CPU, address space, processes, file size, open files),
stdin from a file and stdout/stderr to files in a fresh directory; Python children compile
and run the program in the already-warm interpreter (no new interpreter per test), C++
children ``execve`` the binary. After every test the runner reaps zombies and, if any
process is left in its PID namespace (``kill(-1, 0)`` from PID 1), kills and reaps them
all, so nothing a program started survives into the next run. As PID 1 it cannot be killed
from inside the namespace (the kernel drops signals to init that it does not handle).

Exit statuses the Python child uses to tell the runner what happened are below; a program
can fake them only into a non-pass verdict (passing an assertion test needs the per-run
nonce written to a pipe after the last assertion).
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import resource
import select
import shutil
import signal
import struct
import sys
import time

(
    EXIT_RUNTIME_ERROR,
    EXIT_MEMORY_ERROR,
    EXIT_COMPILE_ERROR,
    EXIT_SETUP_FAILED,
    EXIT_INVALID_TEST,
    EXIT_ASSERTION_FAILED,
) = 101, 102, 103, 104, 105, 106
OUTPUT_KEEP = 1 << 20  # at most this many bytes of a test's stdout are sent back; stderr: 4 KiB
#: Modules solutions commonly import, loaded once here so children start warm. Kept short on
#: purpose: every preloaded page makes each fork dearer (decimal, random, statistics, … would
#: add ~0.25 ms to every run; a program that imports them pays that once, in its own run).
PRELOAD = ("bisect", "collections", "functools", "heapq", "itertools", "math", "operator", "re", "string", "typing")


def send_message(fd: int, message: dict) -> None:
    payload = json.dumps(message).encode()
    view = memoryview(struct.pack(">I", len(payload)) + payload)
    while view:
        view = view[os.write(fd, view) :]


def recv_message(fd: int) -> dict | None:
    """One framed message, or None at end of stream."""
    header = _read_exactly(fd, 4)
    if header is None:
        return None
    body = _read_exactly(fd, struct.unpack(">I", header)[0])
    if body is None:
        return None
    return json.loads(body)


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks, remaining = [], size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _cpu_rlimit(time_s: float) -> int:
    """RLIMIT_CPU's soft limit for a run of ``time_s`` CPU seconds (whole seconds, at least 1)."""
    return max(1, int(time_s + 0.999))


def _set_limits(limits: dict) -> None:
    mib = 1 << 20
    cpu = _cpu_rlimit(limits["time_s"])
    for name, value in (
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_AS, (limits["memory_mb"] * mib,) * 2),
        (resource.RLIMIT_NPROC, (limits["max_processes"],) * 2),
        (resource.RLIMIT_FSIZE, (limits["max_file_mb"] * mib,) * 2),
        (resource.RLIMIT_NOFILE, (limits["max_open_files"],) * 2),
        (resource.RLIMIT_CORE, (0, 0)),
    ):
        resource.setrlimit(name, value)


def _start_child(run_dir: str, stdin_path: str, limits: dict, body) -> tuple[int, int]:
    """Fork a child that sets itself up and calls ``body(nonce_fd)``; returns (pid, nonce read fd)."""
    nonce_read, nonce_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns
        try:
            os.setsid()  # signal dispositions are already the defaults (see main)
            os.chdir(run_dir)
            os.dup2(os.open(stdin_path, os.O_RDONLY), 0)
            os.dup2(os.open("stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
            os.dup2(os.open("stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
            os.dup2(nonce_write, 5)
            os.closerange(3, 5)
            os.closerange(6, 1 << 16)
            _set_limits(limits)
        except BaseException:
            os._exit(EXIT_SETUP_FAILED)
        body(5)
        os._exit(EXIT_SETUP_FAILED)
    os.close(nonce_write)
    return pid, nonce_read


def _wait(pid: int, wall_seconds: float) -> tuple[int, float, float, bool]:
    """Wait for the child up to ``wall_seconds``; kill it on overrun. (status, wall, cpu, timed_out)."""
    start = time.monotonic()
    pidfd = os.pidfd_open(pid)
    try:
        timed_out = not select.select([pidfd], [], [], wall_seconds)[0]
    finally:
        os.close(pidfd)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status, usage = os.wait4(pid, 0)
    return status, time.monotonic() - start, usage.ru_utime + usage.ru_stime, timed_out


def _others_alive() -> bool:
    """Is any process besides us alive in this PID namespace? Zombies are reaped first; then
    ``kill(-1, 0)`` from init succeeds exactly when another process exists."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            break
    try:
        os.kill(-1, 0)
    except ProcessLookupError:
        return False
    return True


def _sweep() -> None:
    """Kill and reap every other process in this PID namespace (we are its init)."""
    assert os.getpid() == 1, "kill(-1) outside a PID namespace would signal every process of this uid"
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _read(path: str, size: int, from_end: bool = False) -> tuple[str, bool]:
    """(text of at most ``size`` bytes, whether the file was longer)."""
    try:
        with open(path, "rb") as handle:
            length = os.fstat(handle.fileno()).st_size
            if from_end and length > size:
                handle.seek(length - size)
            return handle.read(size).decode("utf-8", "replace"), length > size
    except OSError:
        return "", False


def _exit_with_traceback(code: int) -> None:
    import traceback

    traceback.print_exc()
    sys.stderr.flush()
    os._exit(code)


def _python_body(source: str, test_source: str | None, nonce: bytes | None, forget):
    """The child's program: compile and exec the solution, then the assertion test if any."""

    def body(nonce_fd: int) -> None:
        forget()  # drop the other tests of this request from the child's copy of the heap
        try:
            solution_code = compile(source, "<solution>", "exec")
        except BaseException as error:
            print(f"{type(error).__name__}: {error}", file=sys.stderr)
            sys.stderr.flush()
            os._exit(EXIT_COMPILE_ERROR)
        try:
            test_code = compile(test_source, "<test>", "exec") if test_source is not None else None
        except BaseException as error:
            print(f"the test does not compile: {type(error).__name__}: {error}", file=sys.stderr)
            sys.stderr.flush()
            os._exit(EXIT_INVALID_TEST)
        namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        try:
            try:
                exec(solution_code, namespace)
            except SystemExit as stop:
                if test_code is not None or stop.code not in (None, 0):
                    raise
            if test_code is not None:
                try:
                    exec(test_code, namespace)
                except AssertionError:
                    _exit_with_traceback(EXIT_ASSERTION_FAILED)
        except MemoryError:
            os._exit(EXIT_MEMORY_ERROR)
        except BaseException:
            _exit_with_traceback(EXIT_RUNTIME_ERROR)
        try:
            sys.stdout.flush()
        except BaseException:
            os._exit(EXIT_RUNTIME_ERROR)
        if nonce:
            os.write(nonce_fd, nonce)
        os._exit(0)

    return body


def _exec_body(argv: list[str]):
    def body(_nonce_fd: int) -> None:
        os.execve(
            argv[0], argv, {"PATH": "/usr/bin:/bin", "HOME": os.getcwd(), "TMPDIR": os.getcwd(), "LANG": "C.UTF-8"}
        )

    return body


def _classify(status: int, timed_out: bool, cpu: float, limit_s: float, stderr_tail: str) -> str:
    signalled = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    if (
        timed_out
        or cpu > limit_s
        or signalled == signal.SIGXCPU  # RLIMIT_CPU's soft limit
        or (signalled == signal.SIGKILL and cpu >= 0.9 * _cpu_rlimit(limit_s))
    ):  # ... its hard limit
        return "time_limit"
    code = os.waitstatus_to_exitcode(status)
    if code == EXIT_MEMORY_ERROR or "std::bad_alloc" in stderr_tail:
        return "memory_limit"
    if code in (EXIT_SETUP_FAILED, EXIT_INVALID_TEST):
        return "judge_error"
    if code == EXIT_COMPILE_ERROR:
        return "compile_error"
    if code == EXIT_ASSERTION_FAILED:
        return "wrong_answer"
    return "ok" if code == 0 else "runtime_error"


def _run_one(run_dir: str, stdin_text: str, limits: dict, body, nonce: bytes | None) -> dict:
    stdin_path = os.devnull
    if stdin_text:
        stdin_path = os.path.join(run_dir, ".stdin")
        with open(stdin_path, "w") as handle:
            handle.write(stdin_text)
    pid, nonce_read = _start_child(run_dir, stdin_path, limits, body)
    status, wall, cpu, timed_out = _wait(pid, limits["time_s"] * limits["wall_factor"] + 0.5)
    os.set_blocking(nonce_read, False)
    try:
        written = os.read(nonce_read, 64)
    except BlockingIOError:
        written = b""
    os.close(nonce_read)
    left_behind = _others_alive()
    if left_behind:
        _sweep()
    # stderr matters only when the run did not end cleanly (messages, std::bad_alloc)
    stderr = "" if status == 0 else _read(os.path.join(run_dir, "stderr"), 4096, from_end=True)[0]
    stdout, stdout_truncated = _read(os.path.join(run_dir, "stdout"), OUTPUT_KEEP)
    result = {
        "status": _classify(status, timed_out, cpu, limits["time_s"], stderr),
        "exit_code": os.waitstatus_to_exitcode(status),
        "wall_s": round(wall, 6),
        "cpu_s": round(cpu, 6),
        "stdout": stdout,
        "stdout_truncated": stdout_truncated,
        "stderr": stderr,
    }
    if left_behind and result["status"] == "ok":
        result["status"] = "runtime_error"
        result["stderr"] += "\n[judge] the program left processes running"
    if nonce is not None and result["status"] == "ok" and written != nonce:
        result["status"] = "runtime_error"
        result["stderr"] += "\n[judge] the program ended before its assertions finished"
    return result


def _fresh_dir(root: str, keep: frozenset[str] = frozenset()) -> str:
    """``root`` as a private directory holding nothing but ``keep`` (whatever the last run left,
    and the permissions it set on ``root``, are undone)."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        os.mkdir(root, 0o700)
        return root
    for name in names:
        if name in keep:
            continue
        path = os.path.join(root, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    os.chmod(root, 0o700)
    return root


COMPILER_RUNS = [0]  # g++ runs in this runner process


def _compile_cpp(source: str, limits: dict, run_dir: str) -> dict:
    COMPILER_RUNS[0] += 1
    with open(os.path.join(run_dir, "solution.cpp"), "w") as handle:
        handle.write(source)
    compile_limits = dict(
        limits,
        memory_mb=limits["compile_memory_mb"],
        max_processes=max(16, limits["max_processes"]),
        max_file_mb=max(64, limits["max_file_mb"]),
    )
    argv = ["/usr/bin/g++", "-O2", "-std=c++17", "-pipe", "-o", "solution", "solution.cpp"]
    result = _run_one(run_dir, "", dict(compile_limits, time_s=limits["compile_time_s"]), _exec_body(argv), None)
    ok = result["status"] == "ok" and os.path.exists(os.path.join(run_dir, "solution"))
    return {
        "ok": ok,
        "message": "" if ok else (result["stderr"] or result["status"])[-4096:],
        "status": result["status"],
    }


def handle(request: dict, scratch: str) -> dict:
    """Compile once, run every test, each in its own child. Tests: ``{"stdin": str}`` or ``{"code": str}``."""
    limits, tests, language = request["limits"], request["tests"], request["language"]
    run_root = os.path.join(scratch, "run")
    if language == "cpp":
        run_dir = _fresh_dir(run_root)
        compiler_runs_before = COMPILER_RUNS[0]
        compiled = _compile_cpp(request["source"], limits, run_dir)
        if not compiled["ok"]:
            return {"compile": compiled, "runs": []}
        binary = os.path.join(run_dir, "solution")
        runs = []
        for test in tests:
            _fresh_dir(run_dir, keep=frozenset({"solution"}))
            runs.append(_run_one(run_dir, test.get("stdin", ""), limits, _exec_body([binary]), None))
        compilations = COMPILER_RUNS[0] - compiler_runs_before  # reported: tests check "compiled once"
        return {"compile": {"ok": True, "message": "", "compilations": compilations}, "runs": runs}
    runs = []

    def forget() -> None:
        tests.clear()
        request.clear()

    for test in tests:
        nonce = os.urandom(16).hex().encode() if "code" in test else None
        run_dir = _fresh_dir(run_root)
        body = _python_body(request["source"], test.get("code"), nonce, forget)
        runs.append(_run_one(run_dir, test.get("stdin", ""), limits, body, nonce))
        if runs[-1]["status"] == "compile_error":
            return {"compile": {"ok": False, "message": runs[-1]["stderr"][-4096:]}, "runs": []}
    return {"compile": {"ok": True, "message": ""}, "runs": runs}


def main() -> None:
    scratch, site_packages, request_fd, response_fd = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    sys.path.extend(p for p in site_packages.split(os.pathsep) if p)
    if os.getpid() != 1:
        sys.exit("the judge runner must be PID 1 of its own PID namespace (start it through sandbox.py)")
    # Defaults everywhere: as init we then ignore signals sent from inside the namespace, and
    # children start with SIGPIPE / SIGXFSZ fatal again (Python ignores both at start-up).
    for number in (
        signal.SIGINT,
        signal.SIGTERM,
        signal.SIGHUP,
        signal.SIGUSR1,
        signal.SIGUSR2,
        signal.SIGPIPE,
        signal.SIGXFSZ,
    ):
        signal.signal(number, signal.SIG_DFL)
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE=0: no ptrace / /proc/1/mem from runs
    for name in PRELOAD:
        __import__(name)
    # The first compile() of a process builds CPython's AST types (~1 ms): do it once here.
    exec(
        compile(
            "def _warm(n):\n    return [i * i for i in range(n)]\nassert _warm(3) == [0, 1, 4]\n", "<warm-up>", "exec"
        ),
        {},
    )
    os.environ.clear()
    os.environ.update(
        {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": scratch,
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
        }
    )
    os.makedirs(scratch, exist_ok=True)
    gc.freeze()  # children share the warm heap copy-on-write
    send_message(response_fd, {"ready": True, "pid": os.getpid(), "uid": os.getuid()})
    while True:
        request = recv_message(request_fd)
        if request is None:
            return
        try:
            response = handle(request, scratch)
        except Exception as error:  # an infrastructure fault: the host turns it into judge_error
            response = {"error": f"{type(error).__name__}: {error}"}
        request.clear()
        send_message(response_fd, response)


if __name__ == "__main__":
    main()
