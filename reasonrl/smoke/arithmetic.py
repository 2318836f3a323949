"""Two-digit addition: problem generation, the recipes' task formats, and a rule-based reward.

Framework-free. Three formats of one problem, so each recipe's CPU run exercises its own rewards:

- plain: ``12+34=`` -> ``46`` (graded by Math-Verify in the ``reasonrl`` reward manager);
- thinking toggle (Llama-Nemotron): the same prompt after a "detailed thinking on/off" system
  line; ``on`` answers ``<think>12+34</think>46``, ``off`` answers ``46`` (format reward);
- code (MiMo): ``?+34=`` asks for a one-line program that adds 34 to the number on stdin,
  ``print(int(input())+34)`` in a fenced block, judged in the sandbox against three
  stdin/stdout tests with a test-difficulty calibration (input 0 is the easy test: the
  constant program ``print(34)`` passes it).

``compute_score`` has verl's custom-reward signature (``pkg://reasonrl.smoke.arithmetic``): an
exact-match reward for plain answers, for runs with verl's own reward managers.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

DATA_SOURCE = "reasonrl/arithmetic"
CODE_DATA_SOURCE = "reasonrl/arithmetic_code"
#: the nemotron_if recipe's rows: sums with verifiable constraints (``reasonrl.smoke.data``)
INSTRUCTION_DATA_SOURCE = "reasonrl/instruction_following"
#: Llama-Nemotron's system prompts (the chat template puts a system message on its own line).
THINKING_TOGGLE = {"on": "detailed thinking on", "off": "detailed thinking off"}
FORMATS = ("plain", "thinking_on", "thinking_off", "code")


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

    @property
    def thinking_answer(self) -> str:
        """The answer in the "detailed thinking on" format: reasoning in one think block."""
        return f"<think>{self.a}+{self.b}</think>{self.answer}"

    @property
    def code_prompt(self) -> str:
        return f"?+{self.b}="

    @property
    def code_answer(self) -> str:
        return f"```\nprint(int(input())+{self.b})\n```"

    def code_tests(self) -> tuple[list[str], list[str]]:
        """stdin/stdout tests of the code format: input 0 (easy), ``a`` and a third input."""
        inputs = [0, self.a, (7 * self.a + 13) % 100]
        return [f"{x}\n" for x in inputs], [f"{x + self.b}\n" for x in inputs]

    def code_calibration_verdicts(self) -> list[list[bool]]:
        """Which tests three reference programs pass (the calibration's solutions x tests
        matrix): the right program, the constant ``print(b)`` and an off-by-one program."""
        inputs = [int(x) for x in self.code_tests()[0]]
        return [[True] * len(inputs), [x == 0 for x in inputs], [False] * len(inputs)]


def formatted(problem: Problem, form: str) -> tuple[str, str]:
    """(rendered prompt, answer) of ``problem`` in format ``form`` (one of :data:`FORMATS`)."""
    if form == "plain":
        return problem.prompt, problem.answer
    if form == "code":
        return problem.code_prompt, problem.code_answer
    mode = form.removeprefix("thinking_")
    answer = problem.thinking_answer if mode == "on" else problem.answer
    return f"{THINKING_TOGGLE[mode]}\n{problem.prompt}", answer


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
