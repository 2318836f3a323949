"""Hostile programs get a non-pass verdict, the host is unharmed, and the judge keeps serving.

Every case runs through the real judge (bubblewrap + warm runner). "Unharmed" is checked on
the host side: no file appears where the program tried to write, no process is left in the
sandbox besides its runner, a TCP server on the host's loopback sees no connection, the
secret in the host's environment never reaches the program.
"""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from reasonrl.plugins.rewards.judge import JudgeLimits, LocalJudge, Problem, Submission, TestCase, Verdict

SECRET = "reasonrl-host-secret-7d1f"
ADD = Problem("add", (TestCase(stdin="1 2\n", expected_stdout="3"),))
GOOD = "a, b = map(int, input().split())\nprint(a + b)\n"


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as handle:
                    parent = int(handle.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(name))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def sandbox_processes(judge: LocalJudge) -> list[int]:
    """Processes under each started sandbox's bubblewrap, the runner included."""
    processes = []
    for sandbox in judge._all:
        if sandbox._process is not None:
            processes += _descendants(sandbox._process.pid)
    return processes


@pytest.fixture(scope="module")
def judge():
    os.environ[SECRET] = SECRET  # the host's environment holds a secret, name and value
    judge = LocalJudge(JudgeLimits(time_s=1.0, memory_mb=256, max_processes=16, max_file_mb=8), workers=1)
    yield judge
    judge.close()
    del os.environ[SECRET]


@pytest.fixture(scope="module")
def loopback_server():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    connections = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                connections.append(server.accept())
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], connections
    stop.set()
    thread.join()
    server.close()


def _judge(judge, code, language="python", problem=ADD):
    return judge.judge_one(Submission(problem, code, language))


def _assert_contained(judge, result):
    assert result.verdicts and all(v is not Verdict.PASSED for v in result.verdicts), result
    assert not result.judge_error, result  # the program's fault, not the infrastructure's
    time.sleep(0.05)
    assert len(sandbox_processes(judge)) == 1, "something besides the runner survived the run"
    follow_up = _judge(judge, GOOD)
    assert follow_up.verdicts == [Verdict.PASSED], f"the judge stopped serving: {follow_up}"


HOSTILE = {
    "fork_bomb": ("import os\nwhile True:\n    os.fork()\n", {Verdict.RUNTIME_ERROR, Verdict.TIME_LIMIT}),
    "memory_bomb": ("blocks = []\nwhile True:\n    blocks.append(bytearray(64 << 20))\n", {Verdict.MEMORY_LIMIT}),
    "infinite_loop": ("while True:\n    pass\n", {Verdict.TIME_LIMIT}),
    "ignores_sigterm": (
        "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass\n",
        {Verdict.TIME_LIMIT},
    ),
    "stdout_flood_1gb": (
        "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)\n",
        {Verdict.RUNTIME_ERROR},
    ),
    "kill_parent": (
        "import os, signal\nfor target in (os.getppid(), 1, -1):\n    try:\n        "
        "os.kill(target, signal.SIGKILL)\n    except OSError:\n        pass\nprint('survived')\n",
        {Verdict.WRONG_ANSWER},
    ),
    "leftover_children": (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(600)\n    os._exit(0)\nprint(3)\n",
        {Verdict.RUNTIME_ERROR},
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_python_program_is_contained(judge, name):
    code, expected = HOSTILE[name]
    result = _judge(judge, code)
    assert set(result.verdicts) <= expected, result
    _assert_contained(judge, result)


def test_network_connection_to_the_host_fails(judge, loopback_server):
    port, connections = loopback_server
    code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint(3)\n"
    result = _judge(judge, code)
    assert result.verdicts == [Verdict.RUNTIME_ERROR], result
    outside = "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)\nprint(3)\n"
    assert _judge(judge, outside).verdicts == [Verdict.RUNTIME_ERROR]
    time.sleep(0.3)
    assert connections == []
    _assert_contained(judge, result)


def test_writes_outside_the_run_directory_fail(judge, tmp_path):
    tmp_path.chmod(0o777)  # writable by anyone on the host: only the sandbox stops the write
    targets = [
        tmp_path / "pwned",
        "/tmp/reasonrl-pwned",
        os.path.expanduser("~/reasonrl-pwned"),
        "/var/tmp/reasonrl-pwned",
    ]
    lines = "".join(
        f"    try:\n        open({str(t)!r}, 'w').write('x')\n        wrote += 1\n    except OSError:\n        pass\n"
        for t in targets
    )
    code = f"wrote = 0\nif True:\n{lines}print(3 if wrote == 0 else 'wrote')\nassert wrote == 0\n"
    result = _judge(judge, code)
    # /tmp inside the sandbox is its own tmpfs: the write there succeeds but stays inside.
    assert result.verdicts != [Verdict.JUDGE_ERROR]
    for target in targets:
        assert not os.path.exists(target), f"the program created {target} on the host"
    writer = "open('../escape', 'w').write('x')\nopen('/proc/1/environ').read()\nprint(3)\n"
    contained = _judge(judge, writer)
    assert contained.verdicts == [Verdict.RUNTIME_ERROR], contained
    _assert_contained(judge, contained)


def test_host_environment_is_invisible(judge):
    problem = Problem("secret", (TestCase(stdin="", expected_stdout=SECRET),))
    code = (
        "import os\nfound = [v for k, v in os.environ.items() if 'secret' in (k + v).lower()]\n"
        "for path in ('/proc/1/environ', '/proc/self/environ'):\n"
        "    try:\n        found += [x for x in open(path, 'rb').read().decode().split('\\0') if 'secret' in x.lower()]\n"
        "    except OSError:\n        pass\n"
        "print(found[0].split('=')[-1] if found else 'nothing')\n"
    )
    result = _judge(judge, code, problem=problem)
    assert result.verdicts == [Verdict.WRONG_ANSWER], result
    _assert_contained(judge, result)


def test_cpp_fork_bomb_and_timeout_are_contained(judge):
    bomb = "#include <unistd.h>\nint main(){ while (true) fork(); }\n"
    result = _judge(judge, bomb, language="cpp")
    assert set(result.verdicts) <= {Verdict.RUNTIME_ERROR, Verdict.TIME_LIMIT}, result
    _assert_contained(judge, result)
    spin = "#include <csignal>\nint main(){ signal(SIGTERM, SIG_IGN); volatile long x = 0; while (true) x++; }\n"
    result = _judge(judge, spin, language="cpp")
    assert result.verdicts == [Verdict.TIME_LIMIT], result
    _assert_contained(judge, result)


def test_a_crashed_runner_is_a_judge_error_and_is_replaced(judge):
    """Infrastructure failure (the runner is killed from the host mid-run) → judge_error, then recovery."""

    def kill_runner_soon():
        time.sleep(0.5)
        for pid in sandbox_processes(judge):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass

    killer = threading.Thread(target=kill_runner_soon)
    killer.start()
    result = _judge(judge, "import time\ntime.sleep(0.9)\nprint(3)\n")
    killer.join()
    assert result.verdicts == [Verdict.JUDGE_ERROR], result
    assert _judge(judge, GOOD).verdicts == [Verdict.PASSED]
