"""Two-digit addition: problem generation and the rule-based reward verl calls.

Framework-free. ``compute_score`` has verl's custom-reward signature and is loaded by verl's
reward loop from ``pkg://reasonrl.smoke.arithmetic``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

DATA_SOURCE = "reasonrl/arithmetic"


@dataclass(frozen=True)
class Problem:
    a: int
    b: int

    @property
    def prompt(self) -> str:
        return f"{self.a}+{self.b}="

    @property
    def answer(self) -> str:
        return str(self.a + self.b)


#: Operands in [0, MAX_OPERAND]: 10,000 distinct problems, too many to memorise, so what the
#: policy learns (in the warm start and in RL) has to be the addition itself.
MAX_OPERAND = 99


def make_problems(count: int, seed: int, max_operand: int = MAX_OPERAND) -> list[Problem]:
    """``count`` distinct problems with operands in [0, max_operand], in a seeded order."""
    every = [Problem(a, b) for a in range(max_operand + 1) for b in range(max_operand + 1)]
    if count > len(every):
        raise ValueError(f"only {len(every)} distinct problems with operands <= {max_operand}")
    return random.Random(seed).sample(every, count)


def extract_answer(solution: str) -> str:
    """The leading run of digits of the response (the model stops with EOS after it)."""
    digits = ""
    for char in solution.strip():
        if not char.isdigit():
            break
        digits += char
    return digits


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float:
    """1.0 if the response starts with exactly the right sum, else 0.0 (verl reward signature)."""
    return 1.0 if extract_answer(solution_str) == str(ground_truth).strip() else 0.0
