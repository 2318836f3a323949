"""Math-Verify with a hard per-answer time bound on any thread (MiMo §3.3 math reward).

Math-Verify's own timeouts use SIGALRM, which works only on a process's main thread; verl's
reward loop grades in executor threads, where a power tower such as ``9^{9^{9^{9}}}`` then
runs unbounded and, holding the interpreter lock, stalls the whole reward process. So answers
are graded in a small pool of warm worker processes (``math_worker.py``), each grading on its
own main thread under a SIGALRM deadline; the host waits at most ``timeout_s`` + a grace for
the answer and otherwise kills the worker and starts a replacement. A worker that dies (out
of memory, a crash) is replaced too. The caller's thread only waits on a pipe, so the
calling process stays responsive however hostile the answer.

Every outcome is a :class:`MathOutcome`: ``verified`` (score 0 or 1), ``timeout`` or
``failed`` (both score 0, counted by the reward manager as ``math_timeout`` /
``math_failed``). Never raises for an answer's content.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from reasonrl.plugins.rewards.math_worker import final_answer_text, send_message

#: the host waits this long past the worker's own deadline before killing it
HARD_GRACE_S = 1.0
LOG = logging.getLogger("reasonrl.rewards.math")


@dataclass(frozen=True)
class MathOutcome:
    score: float
    status: str  # "verified" | "timeout" | "failed"
    detail: str = ""


@dataclass(frozen=True)
class VerifierSettings:
    """``timeout_s``: per-answer bound (the worker's SIGALRM deadline; the host kills it
    ``HARD_GRACE_S`` later); ``soft_timeout``: False leaves only the host's kill (tests of
    that path); ``workers``: worker processes; ``memory_mb``: address-space limit of each."""

    workers: int = 1
    timeout_s: float = 5.0
    memory_mb: int = 2048
    startup_timeout_s: float = 120.0
    soft_timeout: bool = True

    def __post_init__(self):
        for key, low in (("workers", 1), ("timeout_s", 0.05), ("memory_mb", 256), ("startup_timeout_s", 1.0)):
            if getattr(self, key) < low:
                raise ValueError(f"VerifierSettings.{key} = {getattr(self, key)}: must be ≥ {low}")


class _Worker:
    """One worker process and its pipes; used by one thread at a time."""

    def __init__(self, settings: VerifierSettings):
        soft = settings.timeout_s if settings.soft_timeout else 0
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reasonrl.plugins.rewards.math_worker", str(soft), str(settings.memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        self.ready = False
        self.closed = False  # its end of a pipe closed: the process died or is exiting
        self._buffer = b""
        self._poller = select.poll()
        self._poller.register(self.process.stdout.fileno(), select.POLLIN)

    def _read_message(self, deadline: float) -> dict | None:
        """One framed message before ``deadline`` (monotonic), or None (time out, or the worker died)."""
        fd = self.process.stdout.fileno()
        while True:
            if len(self._buffer) >= 4:
                size = struct.unpack(">I", self._buffer[:4])[0]
                if len(self._buffer) >= 4 + size:
                    body, self._buffer = self._buffer[4 : 4 + size], self._buffer[4 + size :]
                    return json.loads(body)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._poller.poll(remaining * 1000):  # poll: fds ≥ 1024 are fine
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                self.closed = True
                return None
            self._buffer += chunk

    def wait_ready(self, timeout_s: float) -> bool:
        if self.closed:
            return False
        if not self.ready:
            message = self._read_message(time.monotonic() + timeout_s)
            self.ready = bool(message and message.get("ready"))
        return self.ready

    def ask(self, response: str, gold: str, timeout_s: float) -> dict | None:
        if self.closed:
            return None
        try:
            send_message(self.process.stdin.fileno(), {"response": response, "gold": gold})
        except OSError:  # BrokenPipeError: it is gone
            self.closed = True
            return None
        return self._read_message(time.monotonic() + timeout_s)

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()
        self.closed = True
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                pipe.close()
            except OSError:
                pass


class MathVerifier:
    """A pool of warm Math-Verify worker processes, started on first use; thread-safe."""

    def __init__(self, settings: VerifierSettings | None = None):
        self.settings = settings or VerifierSettings()
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self._owner_pid = os.getpid()
        self.counts = {"verified": 0, "timeout": 0, "failed": 0, "restarts": 0}

    def _start(self) -> None:
        with self._lock:
            if self._workers:
                return
            started: list[_Worker] = []
            try:
                for _ in range(self.settings.workers):
                    started.append(_Worker(self.settings))
            except OSError:
                for worker in started:
                    worker.kill()
                raise
            for worker in started:
                self._workers.append(worker)
                self._idle.put(worker)

    def _replace(self, worker: _Worker) -> _Worker:
        """A fresh worker in ``worker``'s place; ``worker`` itself (ended) if none can start,
        so the pool never shrinks: it is replaced again on its next use."""
        worker.kill()
        try:
            fresh = _Worker(self.settings)
        except OSError as error:
            LOG.warning("cannot start a math verifier process: %s", error)
            return worker
        with self._lock:
            if worker in self._workers:
                self._workers[self._workers.index(worker)] = fresh
            else:  # closed meanwhile: still tracked, so close() ends it
                self._workers.append(fresh)
            self.counts["restarts"] += 1
        return fresh

    def verify(self, response: str, gold: str) -> MathOutcome:
        """Grade one answer: at most ``timeout_s`` + ``HARD_GRACE_S`` of a worker's time (plus
        the wait for a free worker and a fresh worker's start); twice that if the first worker
        died on it (tried once more on a fresh one, then ``failed``)."""
        if os.getpid() != self._owner_pid:  # a forked child must not share the parent's workers
            self.__init__(self.settings)
        try:
            self._start()
        except OSError as error:
            return self._finish(MathOutcome(0.0, "failed", f"cannot start the math verifier: {error}"), response)
        worker = self._idle.get()
        try:
            outcome, worker = self._grade(worker, response, gold)
        except Exception as error:  # never the reward worker's exception: this answer fails
            outcome = MathOutcome(0.0, "failed", f"{type(error).__name__}: {error}")
        finally:
            self._idle.put(worker)
        return self._finish(outcome, response)

    def _finish(self, outcome: MathOutcome, response: str) -> MathOutcome:
        with self._lock:
            self.counts[outcome.status] += 1
        if outcome.status != "verified":
            LOG.warning(
                "math answer scored 0 (%s: %s): %r",
                outcome.status,
                outcome.detail or f"past {self.settings.timeout_s} s",
                final_answer_text(response)[:120],
            )
        return outcome

    def _grade(self, worker: _Worker, response: str, gold: str) -> tuple[MathOutcome, _Worker]:
        """The outcome, and the worker to put back (a replacement where this one was ended)."""
        if worker.process.poll() is not None:  # died while idle: not this answer's doing
            worker = self._replace(worker)
        if not worker.wait_ready(self.settings.startup_timeout_s):
            worker = self._replace(worker)
            if not worker.wait_ready(self.settings.startup_timeout_s):
                return MathOutcome(0.0, "failed", "the math verifier process did not start"), worker
        for attempt in range(2):  # a worker that dies is replaced and the answer tried once more
            answer = worker.ask(response, gold, self.settings.timeout_s + HARD_GRACE_S)
            if answer is not None:
                if answer.get("exit"):  # out of memory: it exits after answering
                    worker = self._replace(worker)
                return MathOutcome(float(answer["score"]), answer["status"], answer.get("error", "")), worker
            died = worker.closed
            worker = self._replace(worker)
            if not died:  # alive past the hard deadline: killed
                return MathOutcome(0.0, "timeout", "killed at the hard deadline"), worker
            if attempt == 1 or not worker.wait_ready(self.settings.startup_timeout_s):
                break
        return MathOutcome(0.0, "failed", "the math verifier process died on this answer"), worker

    def worker_pids(self) -> list[int]:
        with self._lock:
            return [w.process.pid for w in self._workers]

    def close(self) -> None:
        with self._lock:
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.kill()
        self._idle = queue.Queue()


_default: MathVerifier | None = None
_default_lock = threading.Lock()


def default_verifier() -> MathVerifier:
    """This process's verifier (``configure`` sets it up; defaults otherwise)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = MathVerifier()
        return _default


def configure(settings: VerifierSettings) -> MathVerifier:
    """Use ``settings`` for this process's verifier (a running one with other settings is closed)."""
    global _default
    with _default_lock:
        if _default is not None and _default.settings != settings:
            _default.close()
            _default = None
        if _default is None:
            _default = MathVerifier(settings)
        return _default


@atexit.register
def _close_default() -> None:
    if _default is not None:
        _default.close()
