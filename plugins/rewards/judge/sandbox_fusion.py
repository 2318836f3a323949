"""Scale-out backend: the same submissions, judged by a SandboxFusion server.

SandboxFusion (bytedance/SandboxFusion) is the open-source judge service verl's code scorers
already speak to (``verl.utils.reward_score.sandbox_fusion``). Its ``/run_code`` endpoint runs
one program on one stdin, so a submission becomes one request per test (SandboxFusion
compiles per request: no once-compilation on this backend). Request and response fields
are the ones verl's client uses:

    request:  {"code", "stdin", "language", "compile_timeout", "run_timeout", "memory_limit_MB", "files": {}, "fetch_files": []}
    response: {"status": "Success" | "Failed" | "SandboxError",
               "compile_result": {"status", "return_code", "stderr", ...} | null,
               "run_result": {"status": "Finished" | "Error" | "TimeLimitExceeded", "stdout", "stderr", "return_code", ...} | null}

Tested here only at the HTTP boundary, against a local fake server (no SandboxFusion runs on
this machine): the request fields and the response → verdict mapping.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from reasonrl.plugins.rewards.judge.batch import BatchJudge
from reasonrl.plugins.rewards.judge.formats import JudgeResult, Submission, TestCase, Verdict, outputs_match
from reasonrl.plugins.rewards.judge.local import JudgeLimits

RETRIED_HTTP_STATUS = {502, 503, 504}


def request_body(submission: Submission, test: TestCase, limits: JudgeLimits) -> dict:
    code = submission.code
    if test.assertion is not None:
        code = "\n".join(part for part in (submission.code, submission.problem.test_code(test)) if part)
    return {
        "code": code,
        "stdin": test.stdin or "",
        "language": submission.language,
        "compile_timeout": limits.compile_time_s,
        "run_timeout": limits.time_s,
        "memory_limit_MB": limits.memory_mb,
        "files": {},
        "fetch_files": [],
    }


def verdict_from_response(response: dict, test: TestCase, float_tolerance: float | None) -> Verdict:
    """SandboxFusion's answer for one test → a verdict (the same rules as verl's client)."""
    status = response.get("status")
    if status == "SandboxError" or status not in ("Success", "Failed"):
        return Verdict.JUDGE_ERROR
    compiled = response.get("compile_result") or {}
    if compiled.get("status") in ("Error", "TimeLimitExceeded") or compiled.get("return_code") not in (None, 0):
        return Verdict.COMPILE_ERROR
    run = response.get("run_result")
    if not run:
        return Verdict.JUDGE_ERROR
    if run.get("status") == "TimeLimitExceeded":
        return Verdict.TIME_LIMIT
    if run.get("status") != "Finished" or run.get("return_code") not in (0, None):
        stderr = run.get("stderr") or ""
        if "MemoryError" in stderr or "std::bad_alloc" in stderr:
            return Verdict.MEMORY_LIMIT
        if test.assertion is not None and "AssertionError" in stderr:
            return Verdict.WRONG_ANSWER
        return Verdict.RUNTIME_ERROR
    if test.assertion is not None:
        return Verdict.PASSED
    return (
        Verdict.PASSED
        if outputs_match(run.get("stdout") or "", test.expected_stdout or "", float_tolerance)
        else Verdict.WRONG_ANSWER
    )


class SandboxFusionJudge(BatchJudge):
    """Same interface as :class:`LocalJudge`; ``url`` is the server's ``/run_code`` endpoint."""

    def __init__(self, url: str, limits: JudgeLimits | None = None, max_concurrent: int = 32, retries: int = 3):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"sandbox_fusion url must be an http(s) URL, got {url!r}")
        self.url, self.limits, self.retries = url, limits or JudgeLimits(), retries
        self._executor = ThreadPoolExecutor(max_workers=max_concurrent, thread_name_prefix="reasonrl-sandbox-fusion")

    def _post(self, body: dict) -> dict | None:
        data = json.dumps(body).encode()
        timeout = self.limits.compile_time_s + self.limits.time_s + 10
        for attempt in range(self.retries):
            request = urllib.request.Request(
                self.url, data=data, headers={"Content-Type": "application/json", "Accept": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=timeout) as reply:
                    return json.loads(reply.read())
            except urllib.error.HTTPError as error:
                if error.code not in RETRIED_HTTP_STATUS:
                    return None
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(0.2 * (attempt + 1))
        return None

    def judge_one(self, submission: Submission) -> JudgeResult:
        result = JudgeResult(submission.problem.problem_id, submission.solution_id, submission.language, [])
        for test in submission.problem.tests:
            response = self._post(request_body(submission, test, self.limits))
            if response is None:
                result.verdicts.append(Verdict.JUDGE_ERROR)
                result.message = result.message or f"no answer from {self.url}"
                continue
            result.verdicts.append(verdict_from_response(response, test, self.limits.float_tolerance))
            result.times_s.append(float((response.get("run_result") or {}).get("execution_time") or 0.0))
        return result
