"""Math reward: rule-based equivalence through Math-Verify (MiMo §3.3).

The gold answer and the response are parsed by ``math_verify.parse`` (LaTeX / expression
extraction, boxed answers first) and compared by ``math_verify.verify`` (symbolic and
numeric equivalence). Only the text after the reasoning (after ``</think>`` when present) is
graded, so a think block that mentions candidate answers cannot be matched by accident.

Every answer is graded in this process's :class:`~.math_verifier.MathVerifier` (worker
processes, a hard per-answer time bound on any thread): a hostile answer scores 0 as a
``timeout`` instead of stalling the reward loop. ``reasonrl.api.math_reward`` is
:func:`math_reward`; the reward manager calls :func:`verify_math` (the same path, with the
outcome's status for its counters).
"""

from __future__ import annotations

from reasonrl.plugins.rewards.math_verifier import MathOutcome, default_verifier
from reasonrl.plugins.rewards.math_worker import final_answer_text


def verify_math(response: str, gold: str) -> MathOutcome:
    """Grade ``response`` against ``gold`` in this process's verifier: score and status."""
    return default_verifier().verify(response, str(gold))


def math_reward(response: str, gold: str) -> float:
    """MiMo's math reward (MiMo §3.3; ``reasonrl.api.math_reward``): 1.0 if the response's final
    answer (after ``</think>``) is equivalent to ``gold`` under Math-Verify, else 0.0. Graded in
    this process's pool of worker processes with a hard per-answer time bound on any thread
    (``reasonrl.rewards.math_timeout_s``, 5 s by default): an answer that cannot be graded in
    time, or that breaks the verifier, scores 0.0. The reward manager grades through the same
    path (:func:`verify_math`), so in a reward worker both share one pool and its settings."""
    return verify_math(response, gold).score


__all__ = ["final_answer_text", "math_reward", "verify_math"]
