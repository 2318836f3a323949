"""The math reward's hard time bound (issue 18): hostile answers from a worker thread score 0
within 15 s and the process stays responsive; the worker pool survives kills and deaths;
the reward manager's path is the facade's."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from reasonrl import api
from reasonrl.plugins.rewards import scoring
from reasonrl.plugins.rewards.math_verifier import MathVerifier, VerifierSettings, configure, default_verifier

HOSTILE = {
    "power tower, 4 levels": r"The answer is $\boxed{9^{9^{9^{9}}}}$",
    "power tower, 5 levels": r"The answer is $\boxed{9^{9^{9^{9^{9}}}}}$",
    "factorial of a power": r"The answer is $\boxed{(10^{10^{6}})!}$",
    "400-deep parentheses": r"The answer is $\boxed{" + "(" * 400 + "1" + ")" * 400 + "}$",
    "40,000-character sum": r"The answer is $\boxed{" + "+".join(["1"] * 20_000) + "}$",
    "difference of two towers": r"The answer is $\boxed{9^{9^{9^{9}}} - 8^{8^{8^{8}}}}$",
}
ORDINARY = [
    (r"The answer is $\boxed{\frac{1}{2}}$", "0.5", 1.0),
    (r"So $x = \boxed{2\sqrt{3}}$.", r"\sqrt{12}", 1.0),
    (r"$\boxed{3\sqrt{2}}$", r"\sqrt{8}", 0.0),
    (r"The pair is $\boxed{(1, 2)}$", "(1,2)", 1.0),
    (r"The pair is $\boxed{(2, 1)}$", "(1,2)", 0.0),
    (r"The set is $\boxed{\{3, 1, 2\}}$", r"\{1,2,3\}", 1.0),
    (r"<think>maybe \boxed{5}</think> The answer is $\boxed{7}$", "7", 1.0),
    (r"<think>it is \boxed{7}</think> The answer is $\boxed{5}$", "7", 0.0),
    (r"$\boxed{\frac{3}{4}}$", r"\frac{2}{3}", 0.0),
    ("The final answer is 42.", "42", 1.0),
]


@pytest.fixture(scope="module")
def facade_verifier():
    """This process's verifier with the defaults the reward manager uses (5 s bound)."""
    verifier = configure(VerifierSettings(workers=1, timeout_s=5.0))
    yield verifier
    verifier.close()


@pytest.mark.parametrize(("response", "gold", "expected"), ORDINARY)
def test_ordinary_answers_are_graded_through_the_facade(facade_verifier, response, gold, expected):
    assert api.math_reward(response, gold) == expected


def test_hostile_answers_from_a_worker_thread_score_zero_within_the_bound(facade_verifier):
    ticks: list[float] = []
    stop = threading.Event()

    def heartbeat():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.05)

    results: dict[str, tuple[float, float]] = {}

    def grade_all():  # verl's reward loop grades in executor threads, never on the main thread
        for name, response in HOSTILE.items():
            start = time.monotonic()
            results[name] = (api.math_reward(response, "42"), time.monotonic() - start)

    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    worker = threading.Thread(target=grade_all, daemon=True)
    worker.start()
    worker.join(timeout=15 * len(HOSTILE) + 30)
    stop.set()
    beat.join()
    assert not worker.is_alive(), f"grading hung; finished: {results}"
    for name, (score, seconds) in results.items():
        assert score == 0.0, name
        assert seconds < 15.0, f"{name}: {seconds:.1f} s"
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert max(gaps) < 1.0, f"the process stalled for {max(gaps):.1f} s"
    # the pool is still usable afterwards
    assert api.math_reward(r"\boxed{\frac{1}{2}}", "0.5") == 1.0


def test_the_reward_manager_grades_through_the_facades_verifier(facade_verifier):
    before = dict(default_verifier().counts)
    scored = scoring.math_scored(r"It is $\boxed{2}$", "2")
    assert (scored.task_score, scored.correct, scored.math_status) == (1.0, True, "verified")
    assert api.math_reward(r"It is $\boxed{3}$", "2") == 0.0
    assert default_verifier() is facade_verifier
    assert facade_verifier.counts["verified"] == before["verified"] + 2


def test_timeout_flags_reach_the_reward_extra_info():
    from reasonrl.plugins.rewards.config import RewardsConfig

    flags = scoring.incomplete_flags(RewardsConfig(), [1, 2, 3], 10, False)
    timed_out = scoring.combine(scoring.Scored(0.0, False, math_status="timeout"), None, flags, RewardsConfig())
    assert (timed_out["math_timeout"], timed_out["math_failed"], timed_out["score"]) == (1.0, 0.0, 0.0)
    verified = scoring.combine(scoring.Scored(1.0, True, math_status="verified"), None, flags, RewardsConfig())
    assert (verified["math_timeout"], verified["math_failed"]) == (0.0, 0.0)


def test_a_worker_stuck_outside_the_interpreter_is_killed_and_replaced():
    """Without the worker's own SIGALRM deadline only the host's kill bounds the answer."""
    verifier = MathVerifier(VerifierSettings(workers=1, timeout_s=1.0, soft_timeout=False))
    try:
        assert verifier.verify(r"\boxed{7}", "7").score == 1.0
        (first,) = verifier.worker_pids()
        start = time.monotonic()
        outcome = verifier.verify(HOSTILE["power tower, 4 levels"], "42")
        assert (outcome.score, outcome.status) == (0.0, "timeout")
        assert time.monotonic() - start < 5.0
        (second,) = verifier.worker_pids()
        assert second != first
        with pytest.raises(ProcessLookupError):
            os.kill(first, 0)
        assert verifier.verify(r"\boxed{7}", "7").score == 1.0
        assert verifier.counts["restarts"] == 1
    finally:
        verifier.close()


def test_a_worker_that_dies_is_replaced():
    verifier = MathVerifier(VerifierSettings(workers=1, timeout_s=10.0, soft_timeout=False))
    try:
        assert verifier.verify(r"\boxed{7}", "7").score == 1.0
        # dies while idle: the next answer is not charged for it
        os.kill(verifier.worker_pids()[0], signal.SIGKILL)
        assert verifier.verify(r"\boxed{7}", "7").status == "verified"
        # dies while grading: tried once more on a fresh worker; dying again fails the answer (0)
        killed: list[int] = []

        def kill_each_worker_once_grading():
            deadline = time.monotonic() + 8
            while len(killed) < 2 and time.monotonic() < deadline:
                time.sleep(0.5)
                (pid,) = verifier.worker_pids()
                if pid not in killed:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)

        killer = threading.Thread(target=kill_each_worker_once_grading)
        killer.start()
        outcome = verifier.verify(HOSTILE["power tower, 4 levels"], "42")
        killer.join()
        assert (outcome.score, outcome.status) == (0.0, "failed")
        assert verifier.verify(r"\boxed{\frac{1}{2}}", "0.5").score == 1.0
        assert verifier.counts["restarts"] == 3
    finally:
        verifier.close()


def test_a_workers_memory_is_limited():
    """2^(2^33) needs 1 GiB: under a 512 MiB limit the allocation fails inside the worker."""
    verifier = MathVerifier(VerifierSettings(workers=1, timeout_s=20.0, memory_mb=512))
    try:
        assert verifier.verify(r"\boxed{1}", "1").score == 1.0
        (pid,) = verifier.worker_pids()
        assert verifier.verify(r"\boxed{2^{2^{33}}}", "1").score == 0.0
        with open(f"/proc/{pid}/status") as status:
            peak_kib = int(next(line for line in status if line.startswith("VmPeak:")).split()[1])
        assert peak_kib <= 512 * 1024
        assert verifier.verify(r"\boxed{1}", "1").score == 1.0
    finally:
        verifier.close()


def test_concurrent_threads_share_the_pool():
    verifier = MathVerifier(VerifierSettings(workers=2, timeout_s=5.0))
    try:
        answers = [(rf"$\boxed{{\frac{{{k}}}{{{k + 1}}}}}$", rf"\frac{{{2 * k}}}{{{2 * k + 2}}}") for k in range(1, 25)]
        outcomes: list = [None] * len(answers)

        def grade(i):
            outcomes[i] = verifier.verify(*answers[i])

        threads = [threading.Thread(target=grade, args=(i,)) for i in range(len(answers))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [o.score for o in outcomes] == [1.0] * len(answers)
        assert len(set(verifier.worker_pids())) == 2
    finally:
        verifier.close()


def test_settings_are_validated():
    with pytest.raises(ValueError, match="timeout_s"):
        VerifierSettings(timeout_s=0)
    with pytest.raises(ValueError, match="workers"):
        VerifierSettings(workers=0)


@pytest.mark.parametrize(("key", "value"), [("math_timeout_s", 0.0), ("math_workers", 0), ("math_memory_limit_mb", 64)])
def test_bad_knobs_fail_naming_the_key(key, value):
    from omegaconf import OmegaConf

    from reasonrl.config import ConfigError
    from reasonrl.plugins.rewards.config import settings_from

    with pytest.raises(ConfigError, match=f"reasonrl.rewards.{key}"):
        settings_from(OmegaConf.create({"reasonrl": {"rewards": {key: value}}}))


def test_a_verifier_that_cannot_start_fails_the_answer_not_the_caller(monkeypatch, tmp_path):
    verifier = MathVerifier(VerifierSettings(workers=1))
    try:
        monkeypatch.setattr("sys.executable", str(tmp_path / "no-python-here"))
        outcome = verifier.verify(r"\boxed{7}", "7")
        assert (outcome.score, outcome.status) == (0.0, "failed") and "cannot start" in outcome.detail
        monkeypatch.undo()
        assert verifier.verify(r"\boxed{7}", "7").score == 1.0
        # a replacement that cannot start leaves the pool its size: the next answer starts one
        (pid,) = verifier.worker_pids()
        monkeypatch.setattr("sys.executable", str(tmp_path / "no-python-here"))
        os.kill(pid, signal.SIGKILL)
        assert verifier.verify(r"\boxed{7}", "7").status == "failed"
        monkeypatch.undo()
        assert verifier.verify(r"\boxed{7}", "7").score == 1.0
    finally:
        verifier.close()
