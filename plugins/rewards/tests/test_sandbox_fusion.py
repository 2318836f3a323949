"""SandboxFusion backend, tested only at the HTTP boundary against a local fake server.

The fake checks that each request carries the fields SandboxFusion's /run_code takes (the
ones verl's client sends) and answers with SandboxFusion-shaped responses; no program runs.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from reasonrl.plugins.rewards.judge import JudgeLimits, Problem, Submission, TestCase, Verdict
from reasonrl.plugins.rewards.judge.sandbox_fusion import SandboxFusionJudge

REQUIRED = {"code", "stdin", "language", "compile_timeout", "run_timeout", "memory_limit_MB", "files", "fetch_files"}


def finished(stdout, return_code=0, stderr=""):
    return {
        "status": "Success" if return_code == 0 else "Failed",
        "compile_result": None,
        "run_result": {
            "status": "Finished",
            "stdout": stdout,
            "stderr": stderr,
            "return_code": return_code,
            "execution_time": 0.01,
        },
    }


#: stdin → (HTTP status, response body): one answer per kind of outcome
ANSWERS = {
    "ok": (200, finished("3\n")),
    "wrong": (200, finished("4\n")),
    "crash": (200, finished("", 1, "Traceback ...\nZeroDivisionError")),
    "oom": (200, finished("", 1, "MemoryError")),
    "slow": (
        200,
        {
            "status": "Failed",
            "compile_result": None,
            "run_result": {"status": "TimeLimitExceeded", "stdout": "", "stderr": "", "return_code": None},
        },
    ),
    "compile": (
        200,
        {
            "status": "Failed",
            "compile_result": {"status": "Finished", "return_code": 1, "stderr": "error: expected ';'"},
            "run_result": None,
        },
    ),
    "sandbox": (200, {"status": "SandboxError", "message": "runner crashed"}),
    "http500": (500, {"detail": "internal"}),
    "busy": (504, {"detail": "gateway timeout"}),
}


@pytest.fixture(scope="module")
def fake_server():
    seen: list[dict] = []
    attempts: dict[str, int] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            assert self.path == "/run_code" and self.headers["Content-Type"] == "application/json"
            key = body["stdin"] if body["stdin"] in ANSWERS else "ok"
            attempts[key] = attempts.get(key, 0) + 1
            status, answer = ANSWERS[key]
            if key == "busy" and attempts[key] >= 2:  # 504 is retried; the second try succeeds
                status, answer = ANSWERS["ok"]
            if not REQUIRED <= set(body):
                status, answer = 422, {"detail": f"missing {sorted(REQUIRED - set(body))}"}
            payload = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/run_code", seen
    server.shutdown()


def test_request_fields_and_verdict_mapping(fake_server):
    url, seen = fake_server
    tests = tuple(TestCase(stdin=key, expected_stdout="3") for key in ANSWERS)
    problem = Problem("p", tests)
    with SandboxFusionJudge(url, JudgeLimits(time_s=1.5, memory_mb=256, compile_time_s=7)) as judge:
        (result,) = judge.judge_sync([Submission(problem, "print(3)", "python", "s1")])
    assert result.verdicts == [
        Verdict.PASSED,
        Verdict.WRONG_ANSWER,
        Verdict.RUNTIME_ERROR,
        Verdict.MEMORY_LIMIT,
        Verdict.TIME_LIMIT,
        Verdict.COMPILE_ERROR,
        Verdict.JUDGE_ERROR,
        Verdict.JUDGE_ERROR,
        Verdict.PASSED,
    ]
    request = next(r for r in seen if r["stdin"] == "ok")
    assert request == {
        "code": "print(3)",
        "stdin": "ok",
        "language": "python",
        "compile_timeout": 7,
        "run_timeout": 1.5,
        "memory_limit_MB": 256,
        "files": {},
        "fetch_files": [],
    }


def test_assertion_tests_are_sent_as_one_program(fake_server):
    url, seen = fake_server
    problem = Problem("inc", (TestCase(assertion="assert inc(1) == 2"),), setup="import math")
    with SandboxFusionJudge(url) as judge:
        (result,) = judge.judge_sync([Submission(problem, "def inc(x):\n    return x + 1", "python")])
    assert result.verdicts == [Verdict.PASSED]
    assert (
        seen[-1]["code"] == "def inc(x):\n    return x + 1\nimport math\nassert inc(1) == 2" and seen[-1]["stdin"] == ""
    )


def test_unreachable_server_is_a_judge_error():
    with SandboxFusionJudge("http://127.0.0.1:9/run_code", retries=1) as judge:
        (result,) = judge.judge_sync([Submission(Problem("p", (TestCase(stdin="", expected_stdout="1"),)), "print(1)")])
    assert result.verdicts == [Verdict.JUDGE_ERROR] and result.judge_error


def test_bad_url_is_refused():
    with pytest.raises(ValueError, match="http"):
        SandboxFusionJudge("localhost:8080")
