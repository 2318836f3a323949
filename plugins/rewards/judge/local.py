"""The local judge: one sandboxed warm runner per core, an async batch API on top.

    judge = LocalJudge(JudgeLimits(time_s=2))
    results = await judge.judge([Submission(problem, code, "python"), ...])   # or judge_sync(...)
    results[0].verdicts  # one Verdict per test

A solution is compiled once and run against all its tests in one runner (the reports'
sandbox requirement: "once-compilation for multi-run"); different solutions run in parallel on all runners.
"""

from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

from reasonrl.plugins.rewards.judge.batch import BatchJudge
from reasonrl.plugins.rewards.judge.formats import JudgeResult, Problem, Submission, TestCase, Verdict, outputs_match
from reasonrl.plugins.rewards.judge.sandbox import Sandbox, SandboxFailure, SandboxUnavailable

#: the start-up probe: a known-good program through the real path (sandbox, runner, fork, stdin/stdout)
PROBE = Submission(
    Problem("reasonrl-probe", (TestCase(stdin="2 3\n", expected_stdout="5"),)),
    "a, b = map(int, input().split())\nprint(a + b)\n",
    solution_id="probe",
)


@dataclass(frozen=True)
class JudgeLimits:
    """Per-test limits. ``time_s`` is CPU time; the wall-clock limit is ``time_s · wall_factor + 0.5``."""

    time_s: float = 2.0
    wall_factor: float = 2.0
    memory_mb: int = 1024
    max_processes: int = 32
    max_file_mb: int = 16
    max_open_files: int = 64
    compile_time_s: float = 20.0
    compile_memory_mb: int = 2048
    float_tolerance: float | None = None
    tmp_size_mb: int = 256

    def __post_init__(self):
        for key, low in (
            ("time_s", 0.01),
            ("wall_factor", 1.0),
            ("memory_mb", 64),
            ("max_processes", 1),
            ("max_file_mb", 1),
            ("max_open_files", 8),
            ("compile_time_s", 0.1),
            ("compile_memory_mb", 256),
            ("tmp_size_mb", 16),
        ):
            if getattr(self, key) < low:
                raise ValueError(f"JudgeLimits.{key} = {getattr(self, key)}: must be ≥ {low}")

    def to_runner(self) -> dict:
        runner = asdict(self)
        runner.pop("float_tolerance")
        runner.pop("tmp_size_mb")
        return runner


def verdicts_from_runner(submission: Submission, response: dict, float_tolerance: float | None) -> JudgeResult:
    """Map the runner's raw outcomes to one verdict per test (stdout compared here, on the host)."""
    problem, tests = submission.problem, submission.problem.tests
    result = JudgeResult(problem.problem_id, submission.solution_id, submission.language, [])
    if "error" in response:
        result.verdicts, result.message = [Verdict.JUDGE_ERROR] * len(tests), response["error"]
        return result
    compiled = response["compile"]
    if not compiled["ok"]:
        verdict = Verdict.JUDGE_ERROR if compiled.get("status") == "judge_error" else Verdict.COMPILE_ERROR
        result.verdicts, result.message = [verdict] * len(tests), compiled["message"]
        return result
    result.compilations = int(compiled.get("compilations", 0))
    for test, run in zip(tests, response["runs"]):
        if run["status"] != "ok":  # the runner's other statuses are verdict names
            verdict = Verdict(run["status"])
            if verdict is Verdict.JUDGE_ERROR and not result.message:
                result.message = run.get("stderr", "")[-500:]
        elif test.assertion is not None or outputs_match(run["stdout"], test.expected_stdout or "", float_tolerance):
            verdict = Verdict.PASSED
        else:
            verdict = Verdict.WRONG_ANSWER
        result.verdicts.append(verdict)
        result.times_s.append(run.get("cpu_s", 0.0))
    return result


class LocalJudge(BatchJudge):
    """Judge on this machine: ``workers`` sandboxes (default: one per core), started lazily."""

    def __init__(self, limits: JudgeLimits | None = None, workers: int | None = None):
        self.limits = limits or JudgeLimits()
        self.workers = workers or os.cpu_count() or 1
        self._sandboxes: queue.Queue[Sandbox] = queue.Queue()
        self._all = [Sandbox(slot, self.limits.tmp_size_mb) for slot in range(self.workers)]
        for sandbox in self._all:
            self._sandboxes.put(sandbox)
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="reasonrl-judge")
        self._probe_lock = threading.Lock()
        self._probed = False

    def probe(self) -> None:
        """Start a sandbox and judge a known-good program in it (once per judge; it stays warm).

        Raises :class:`SandboxUnavailable` (with the sandbox's stderr or the verdicts) when the
        sandbox cannot start here or the program does not pass: call it before judging, so a
        broken sandbox stops the caller instead of turning every test into ``judge_error``.
        """
        with self._probe_lock:
            if self._probed:
                return
            sandbox = self._sandboxes.get()
            try:
                response = sandbox.run(self._request(PROBE), self._timeout(PROBE))
            except SandboxFailure as failure:
                raise SandboxUnavailable(f"the sandbox started but its runner failed: {failure}") from failure
            finally:
                self._sandboxes.put(sandbox)
            result = verdicts_from_runner(PROBE, response, None)
            if result.verdicts != [Verdict.PASSED]:
                verdicts = ", ".join(v.value for v in result.verdicts)
                raise SandboxUnavailable(
                    f"a known-good program got {verdicts} instead of passed in the sandbox: "
                    f"{result.message.strip()[-2000:] or 'no message'}"
                )
            self._probed = True

    def _request(self, submission: Submission) -> dict:
        problem = submission.problem  # the sandbox never sees an expected output
        tests = [
            {"code": problem.test_code(test)} if test.assertion is not None else {"stdin": test.stdin or ""}
            for test in problem.tests
        ]
        return {
            "language": submission.language,
            "source": submission.code,
            "tests": tests,
            "limits": self.limits.to_runner(),
        }

    def _timeout(self, submission: Submission) -> float:
        per_test = self.limits.time_s * self.limits.wall_factor + 1.5
        return self.limits.compile_time_s + per_test * len(submission.problem.tests) + 15.0

    def judge_one(self, submission: Submission) -> JudgeResult:
        """Blocking: judge one submission on a free runner.

        A runner that dies or hangs mid-run gives ``judge_error`` verdicts (:class:`SandboxFailure`);
        a sandbox that cannot start raises :class:`SandboxUnavailable`: no verdict is made up for it.
        """
        if not submission.problem.tests:
            return JudgeResult(submission.problem.problem_id, submission.solution_id, submission.language, [])
        sandbox = self._sandboxes.get()
        try:
            response = sandbox.run(self._request(submission), self._timeout(submission))
        except SandboxFailure as failure:
            response = {"error": str(failure)}
        finally:
            self._sandboxes.put(sandbox)
        return verdicts_from_runner(submission, response, self.limits.float_tolerance)

    def close(self) -> None:
        for sandbox in self._all:
            sandbox.close()
        self._executor.shutdown(wait=False)
