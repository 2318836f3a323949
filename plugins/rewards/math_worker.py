"""The math verifier's worker process: Math-Verify on one answer at a time.

Started by ``math_verifier.py`` as ``python -m reasonrl.plugins.rewards.math_worker
TIMEOUT_S MEMORY_MB``; reads framed JSON requests ``{"response", "gold"}`` on stdin and
answers ``{"status", "score"}`` on the stdout it had at start (fd 1 is pointed at stderr, so
nothing a library prints can corrupt the protocol). Grading runs on this process's main
thread, so a SIGALRM deadline (``TIMEOUT_S``; 0 = none) interrupts the Python-level work of
a hostile expression and the worker lives on; work that does not return to the interpreter
(one huge big-integer operation) is ended from outside by the host's hard deadline, or, if
the host is gone, by RLIMIT_CPU, which is raised before each request to the CPU time used
so far plus the deadline (the kernel kills the process when it runs past it). The address
space is limited to MEMORY_MB; a MemoryError answers ``failed`` and the worker exits.
"""

from __future__ import annotations

import functools
import math
import os
import resource
import signal
import sys

# the judge runner's framing (4-byte big-endian length + JSON); stdlib only
from reasonrl.plugins.rewards.judge.zygote import recv_message, send_message


def final_answer_text(response: str) -> str:
    """The part of a response that is graded: after the last ``</think>``, else all of it."""
    head, separator, tail = response.rpartition("</think>")
    return tail if separator else response


@functools.lru_cache(maxsize=4096)
def _parsed_gold(gold: str):
    """A group's n responses share one gold answer: it is parsed once."""
    from math_verify import parse

    return parse(gold if "$" in gold or "\\boxed" in gold else f"${gold}$", parsing_timeout=None)


def grade(response: str, gold: str) -> float:
    """1.0 if the response's final answer is equivalent to ``gold`` (Math-Verify), else 0.0.
    Unbounded in time: only call it where a deadline can end it (this worker)."""
    from math_verify import parse, verify

    gold_parsed = _parsed_gold(gold)
    answer = parse(final_answer_text(response), parsing_timeout=None)
    if not gold_parsed or not answer:
        return 0.0
    return 1.0 if verify(gold_parsed, answer, timeout_seconds=None) else 0.0


class _Deadline(BaseException):
    """Raised by SIGALRM; a BaseException so that libraries' ``except Exception`` cannot swallow it."""


def _on_alarm(signum, frame):
    raise _Deadline


def _cpu_used_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _answer(request: dict, timeout_s: float) -> dict:
    # the kernel's bound, for the case the host cannot kill us: CPU so far + this request's share
    budget = math.ceil(_cpu_used_s() + max(timeout_s, 1.0) * 2 + 2)
    resource.setrlimit(resource.RLIMIT_CPU, (budget, resource.RLIM_INFINITY))
    if timeout_s > 0:
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        return {"status": "verified", "score": grade(request["response"], request["gold"])}
    except _Deadline:
        return {"status": "timeout", "score": 0.0}
    except MemoryError:
        return {"status": "failed", "score": 0.0, "error": "out of memory", "exit": True}
    except RecursionError:
        return {"status": "failed", "score": 0.0, "error": "recursion too deep"}
    except Exception as error:  # a library bug on odd input: this answer scores 0, the worker lives on
        return {"status": "failed", "score": 0.0, "error": f"{type(error).__name__}: {error}"[:500]}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def serve(timeout_s: float, memory_mb: int) -> None:
    protocol_out = os.dup(1)
    os.dup2(2, 1)  # stray prints go to stderr, never into the protocol
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the host decides when we stop (stdin closes)
    signal.signal(signal.SIGALRM, _on_alarm)
    if memory_mb > 0:
        limit = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import logging

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # its "timeout disabled" warnings
    grade("\\boxed{1}", "1")  # import and warm sympy / the LaTeX parser before saying ready
    send_message(protocol_out, {"ready": True, "pid": os.getpid()})
    while (request := recv_message(0)) is not None:
        answer = _answer(request, timeout_s)
        send_message(protocol_out, answer)
        if answer.pop("exit", False):
            return


if __name__ == "__main__":
    serve(float(sys.argv[1]), int(sys.argv[2]))
