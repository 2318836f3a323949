"""The code judge under every code reward (MiMo §3.3.1's online judge; Kimi k1.5's and LongCat's sandboxes): isolated runs, per-test verdicts.

Backends: :class:`LocalJudge` (bubblewrap sandboxes with warm runners, this machine) and
:class:`SandboxFusionJudge` (an existing SandboxFusion server). Formats: ``formats.py``.
"""

from reasonrl.plugins.rewards.judge.formats import (
    JudgeResult,
    Problem,
    Submission,
    TestCase,
    Verdict,
    outputs_match,
    parse_tests,
)
from reasonrl.plugins.rewards.judge.local import JudgeLimits, LocalJudge
from reasonrl.plugins.rewards.judge.sandbox import SandboxFailure, SandboxUnavailable

__all__ = [
    "JudgeLimits",
    "JudgeResult",
    "LocalJudge",
    "Problem",
    "SandboxFailure",
    "SandboxUnavailable",
    "Submission",
    "TestCase",
    "Verdict",
    "outputs_match",
    "parse_tests",
]
