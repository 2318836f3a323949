"""Issue 42: a judge that cannot start stops its caller; bad ``reasonrl judge`` input is named.

- the start-up probe (``LocalJudge.probe``) runs a known-good program through the real path
  and raises :class:`SandboxUnavailable` with the sandbox's stderr when that fails; a sandbox
  that cannot start is never turned into ``judge_error`` verdicts;
- ``reasonrl judge`` probes before judging: exit 2, a message on stderr, no verdict file;
- the reward manager's judge is probed when it is built: a broken sandbox raises there;
- every bad input exits 2 with ``reasonrl judge: <file:line or option>: <what is wrong>``
  and no traceback, before any sandbox starts.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from reasonrl.cli.main import main
from reasonrl.errors import DEBUG_ENV
from reasonrl.plugins.rewards.judge import (
    JudgeLimits,
    LocalJudge,
    Problem,
    SandboxUnavailable,
    Submission,
    TestCase,
    Verdict,
    sandbox,
)

BWRAP_SAYS = "bwrap: Creating new namespace failed: Operation not permitted"
PROBLEMS = [
    {"problem_id": "sum", "tests": {"inputs": ["1 2\n"], "outputs": ["3\n"]}},
    {"problem_id": "inc", "tests": {"assertions": ["assert inc(1) == 2"]}},
]
SOLUTIONS = [
    {"problem_id": "sum", "solution_id": "s", "code": "a, b = map(int, input().split())\nprint(a + b)"},
    {"problem_id": "inc", "solution_id": "i", "language": "python", "code": "def inc(x):\n    return x + 1"},
]
ADD = Problem("add", (TestCase(stdin="1 2\n", expected_stdout="3"),))


@pytest.fixture
def broken_sandbox(monkeypatch):
    """bubblewrap fails the way it does where namespaces are not allowed."""
    command = ["/bin/sh", "-c", f"echo '{BWRAP_SAYS}' >&2; exit 1", "sh"]
    monkeypatch.setattr(sandbox, "bubblewrap_command", lambda slot, tmp_size_mb: list(command))


@pytest.fixture
def no_sandbox(monkeypatch):
    """Any sandbox start fails the test: input checks come first."""

    def start(self):
        raise AssertionError("a sandbox started before the input was checked")

    monkeypatch.setattr(sandbox.Sandbox, "_start", start)


def _lines(rows) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


def _judge_cli(tmp_path: Path, capsys, *extra, problems=PROBLEMS, solutions=SOLUTIONS):
    (tmp_path / "p.jsonl").write_text(_lines(problems))
    (tmp_path / "s.jsonl").write_text(_lines(solutions))
    arguments = ["--problems", tmp_path / "p.jsonl", "--solutions", tmp_path / "s.jsonl", "--out", tmp_path / "v.jsonl"]
    code = main(["judge", *map(str, arguments), *map(str, extra)])
    captured = capsys.readouterr()
    return code, captured.err


# --- the probe --------------------------------------------------------------------------


def test_the_probe_passes_once_and_leaves_its_runner_warm():
    with LocalJudge(JudgeLimits(time_s=1.0), workers=1) as judge:
        (runner,) = judge._all
        requests = []
        run = runner.run
        runner.run = lambda request, timeout: requests.append(request["source"]) or run(request, timeout)
        judge.probe()
        pid = runner._process.pid
        judge.probe()  # once per judge: no second run, same runner
        assert len(requests) == 1 and runner._process.pid == pid
        assert judge.judge_one(Submission(ADD, "print(3)")).verdicts == [Verdict.PASSED]
        assert runner._process.pid == pid


def test_a_sandbox_that_cannot_start_raises_with_its_stderr_never_judge_error(broken_sandbox):
    with LocalJudge(workers=1) as judge:
        with pytest.raises(SandboxUnavailable, match="Creating new namespace failed"):
            judge.probe()
        # judging without the probe: still raised, not a judge_error verdict per test
        with pytest.raises(SandboxUnavailable, match="Creating new namespace failed"):
            judge.judge_one(Submission(ADD, "print(3)"))
        with pytest.raises(SandboxUnavailable):
            judge.judge_sync([Submission(ADD, "print(3)")])


def test_a_probe_that_does_not_pass_is_a_sandbox_unavailable(monkeypatch):
    """The sandbox starts but the known-good program fails (e.g. the runner cannot run programs)."""
    from reasonrl.plugins.rewards.judge import local

    broken = Submission(local.PROBE.problem, "raise SystemExit(3)\n", solution_id="probe")
    monkeypatch.setattr(local, "PROBE", broken)
    with LocalJudge(workers=1) as judge:
        with pytest.raises(SandboxUnavailable, match="got runtime_error instead of passed"):
            judge.probe()


# --- reasonrl judge when the sandbox cannot start ------------------------------------------


def test_judge_cli_exits_2_without_verdicts_when_the_sandbox_cannot_start(tmp_path, capsys, broken_sandbox):
    code, err = _judge_cli(tmp_path, capsys)
    assert code == 2
    assert err.startswith("reasonrl judge: the judge's sandbox cannot start here") and BWRAP_SAYS in err
    assert "Traceback" not in err
    assert not (tmp_path / "v.jsonl").exists()


def test_judge_cli_exits_2_when_the_probe_program_does_not_pass(tmp_path, capsys, monkeypatch):
    """A sandbox that starts but cannot run a known-good program judges nothing either."""
    from reasonrl.plugins.rewards.judge import local

    monkeypatch.setattr(local, "PROBE", Submission(local.PROBE.problem, "raise SystemExit(3)\n"))
    code, err = _judge_cli(tmp_path, capsys)
    assert code == 2 and "got runtime_error instead of passed" in err
    assert not (tmp_path / "v.jsonl").exists()


def test_judge_cli_without_bubblewrap_on_path(tmp_path):
    """The console condition, in a subprocess: ``bwrap`` not on PATH."""
    (tmp_path / "p.jsonl").write_text(_lines(PROBLEMS))
    (tmp_path / "s.jsonl").write_text(_lines(SOLUTIONS))
    environment = dict(os.environ, PATH=str(tmp_path / "empty-bin"))
    environment.pop(DEBUG_ENV, None)
    arguments = ["--problems", "p.jsonl", "--solutions", "s.jsonl", "--out", "out/v.jsonl"]
    result = subprocess.run(
        [sys.executable, "-m", "reasonrl.cli.main", "judge", *arguments],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "bubblewrap (bwrap) is not installed" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


# --- the reward manager ---------------------------------------------------------------------


def test_the_reward_managers_judge_is_probed_and_a_broken_one_raises(broken_sandbox, monkeypatch):
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase  # noqa: F401  (verl first)

    from reasonrl.plugins.rewards import scoring
    from reasonrl.plugins.rewards.config import RewardsConfig
    from reasonrl.plugins.rewards.verl_reward_manager import ReasonrlRewardManager

    with pytest.raises(SandboxUnavailable, match="judge_backend=local.*Creating new namespace failed"):
        scoring.make_judge(RewardsConfig(judge_workers=1))

    builds = []
    make_judge = scoring.make_judge
    monkeypatch.setattr(scoring, "make_judge", lambda *a, **k: builds.append(1) or make_judge(*a, **k))
    config = OmegaConf.create({"reasonrl": {"rewards": {"judge_workers": 1}}})
    manager = ReasonrlRewardManager(config, types.SimpleNamespace(eos_token_id=1))
    code_truth = {"inputs": ["1 2\n"], "outputs": ["3\n"]}

    async def score(response, truth):
        manager.loop = asyncio.get_running_loop()
        return await manager._task_score(None, response, truth, {})

    for _ in range(2):  # raised on every code response, not scored judge_error; probed once
        with pytest.raises(SandboxUnavailable, match="Creating new namespace failed"):
            asyncio.run(score("```python\nprint(3)\n```", code_truth))
    assert builds == [1]
    with pytest.raises(SandboxUnavailable):
        assert manager.judge is None


# --- bad input: named, exit 2, no traceback, before any sandbox --------------------------------


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (dict(problems=PROBLEMS[:1] + ['{"problem_id": "inc", "tests": ']), "p.jsonl:2: not valid JSON: "),
        (dict(solutions=SOLUTIONS + ["", "{'problem_id': 'sum'}"]), "s.jsonl:4: not valid JSON: "),
        (dict(solutions=['["sum", "print(3)"]']), "s.jsonl:1: must be a JSON object, got list"),
        (dict(solutions=[{"problem_id": "sum", "solution_id": "x"}]), "s.jsonl:1: no 'code' field"),
        (dict(solutions=SOLUTIONS + [{"problem_id": "sum", "code": 3}]), "s.jsonl:3: 'code' must be a string"),
        (
            dict(solutions=[{"problem_id": "sum", "language": "rust", "code": "fn main() {}"}]),
            "s.jsonl:1: unknown language 'rust': use one of python, cpp",
        ),
        (dict(solutions=[{"problem_id": "nope", "code": "pass"}]), "s.jsonl:1: unknown problem 'nope'"),
        (dict(solutions=[{"code": "pass"}]), "s.jsonl:1: no 'problem_id' field"),
        (dict(problems=[{"problem_id": "sum"}]), "p.jsonl:1: no 'tests' field"),
        (dict(problems=[{"problem_id": "sum", "tests": {"inputs": ["1"]}}]), "p.jsonl:1: bad tests: "),
        (dict(problems=[{"problem_id": "sum", "tests": "{not json"}]), "p.jsonl:1: bad tests: "),
        (dict(problems=[{"tests": {"assertions": []}}]), "p.jsonl:1: no 'problem_id' field"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_judge_cli_names_the_bad_line(tmp_path, capsys, monkeypatch, no_sandbox, change, expected):
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    code, err = _judge_cli(tmp_path, capsys, **change)
    assert code == 2
    assert err.startswith(f"reasonrl judge: {tmp_path}/{expected}"), err
    assert "Traceback" not in err and not (tmp_path / "v.jsonl").exists()


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--time-limit", "-1"], "--time-limit: must be ≥ 0.01, got -1.0"),
        (["--time-limit", "0"], "--time-limit: must be ≥ 0.01, got 0.0"),
        (["--time-limit", "nan"], "--time-limit: must be ≥ 0.01, got nan"),
        (["--time-limit", "inf"], "--time-limit: must be ≥ 0.01, got inf"),
        (["--memory-mb", "10"], "--memory-mb: must be ≥ 64, got 10"),
        (["--workers", "0"], "--workers: must be ≥ 1, got 0"),
        (["--float-tolerance", "-0.5"], "--float-tolerance: must be ≥ 0.0, got -0.5"),
        (["--backend", "sandbox_fusion"], "--url: is required with --backend sandbox_fusion"),
        (["--backend", "sandbox_fusion", "--url", "localhost:8080"], "--url: must be an http(s) URL"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_judge_cli_names_the_bad_option(tmp_path, capsys, monkeypatch, no_sandbox, options, expected):
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    code, err = _judge_cli(tmp_path, capsys, *options)
    assert code == 2
    assert err.startswith(f"reasonrl judge: {expected}"), err
    assert "Traceback" not in err and not (tmp_path / "v.jsonl").exists()


@pytest.mark.parametrize("missing", ["--problems", "--solutions"])
def test_judge_cli_names_a_missing_input_file(tmp_path, capsys, monkeypatch, no_sandbox, missing):
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    (tmp_path / "p.jsonl").write_text(_lines(PROBLEMS))
    (tmp_path / "s.jsonl").write_text(_lines(SOLUTIONS))
    files = {"--problems": tmp_path / "p.jsonl", "--solutions": tmp_path / "s.jsonl"}
    files[missing] = tmp_path / "missing.jsonl"
    arguments = [str(a) for pair in files.items() for a in pair]
    code = main(["judge", *arguments, "--out", str(tmp_path / "v.jsonl")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"reasonrl judge: {tmp_path}/missing.jsonl: no such file"), err
    assert "Traceback" not in err


def test_judge_cli_refuses_a_folder_as_out(tmp_path, capsys, monkeypatch, no_sandbox):
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    (tmp_path / "v.jsonl").mkdir()
    code, err = _judge_cli(tmp_path, capsys)
    assert code == 2 and err.startswith(f"reasonrl judge: --out: {tmp_path}/v.jsonl is a directory"), err


def test_a_bad_line_is_named_by_the_console_command_too(tmp_path):
    """The same check through a real process: one line on stderr, no traceback."""
    (tmp_path / "p.jsonl").write_text(_lines(PROBLEMS))
    (tmp_path / "s.jsonl").write_text(_lines([SOLUTIONS[0], {"problem_id": "sum"}]))
    environment = {k: v for k, v in os.environ.items() if k != DEBUG_ENV}
    arguments = ["--problems", "p.jsonl", "--solutions", "s.jsonl", "--out", "v.jsonl"]
    result = subprocess.run(
        [sys.executable, "-m", "reasonrl.cli.main", "judge", *arguments],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=120,
    )
    assert (result.returncode, result.stderr) == (2, "reasonrl judge: s.jsonl:2: no 'code' field\n")


# --- reasonrl train: the judge probed in the driver when the data holds code problems -----------


def _rl_parquet(path: Path, ground_truths: list) -> str:
    import pandas as pd

    rows = [{"prompt": "q", "data_source": "toy", "reward_model": {"ground_truth": truth}} for truth in ground_truths]
    pd.DataFrame(rows).to_parquet(path)
    return str(path)


def test_train_probes_the_judge_in_the_driver_only_for_code_data(tmp_path, broken_sandbox):
    from omegaconf import OmegaConf

    from reasonrl.errors import UserError
    from reasonrl.plugins.rewards.config import RewardsConfig
    from reasonrl.plugins.rewards.startup import probe_judge_for_code_data

    math_only = _rl_parquet(tmp_path / "math.parquet", ["2", "\\frac{1}{2}"])
    code = json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})
    with_code = _rl_parquet(tmp_path / "code.parquet", ["2", code])

    def config(train, val):
        return OmegaConf.create({"data": {"train_files": [train], "val_files": val}})

    probe_judge_for_code_data(config(math_only, math_only), RewardsConfig(judge_workers=1))  # no sandbox needed
    probe_judge_for_code_data(config(with_code, None), RewardsConfig(judge_backend="sandbox_fusion"))
    with pytest.raises(UserError) as refused:
        probe_judge_for_code_data(config(math_only, with_code), RewardsConfig(judge_workers=1))
    assert refused.value.subject == "reasonrl.rewards.judge_backend"
    assert with_code in refused.value.message and BWRAP_SAYS in refused.value.message
