"""Math reward: rule-based equivalence through Math-Verify (MiMo §3.3; SPEC §2).

The gold answer and the response are parsed by ``math_verify.parse`` (LaTeX / expression
extraction, boxed answers first) and compared by ``math_verify.verify`` (symbolic and
numeric equivalence). Only the text after the reasoning (after ``</think>`` when present) is
graded, so a think block that mentions candidate answers cannot be matched by accident.
Math-Verify's own timeouts use SIGALRM, which only works in a process's main thread: off
the main thread (verl's reward loop scores in executor threads) they are switched off.
"""

from __future__ import annotations

import threading


def final_answer_text(response: str) -> str:
    """The part of a response that is graded: after the last ``</think>``, else all of it."""
    head, separator, tail = response.rpartition("</think>")
    return tail if separator else response


def math_reward(response: str, gold: str) -> float:
    """1.0 if the response's final answer is equivalent to ``gold`` (Math-Verify), else 0.0."""
    from math_verify import parse, verify

    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    gold_parsed = parse(gold if "$" in gold or "\\boxed" in gold else f"${gold}$", parsing_timeout=timeout)
    answer = parse(final_answer_text(response), parsing_timeout=timeout)
    if not gold_parsed or not answer:
        return 0.0
    return 1.0 if verify(gold_parsed, answer, timeout_seconds=timeout) else 0.0
