"""Benchmark files in their usual local formats, read into one problem shape.

- ``math``: AIME / MATH-500 style rows, ``problem`` (or ``question``) and ``answer``;
- ``choice``: GPQA style, ``question``, ``choices`` (a list) and ``answer`` (a letter or an index);
- ``code``: LiveCodeBench style, ``question`` and ``tests`` (``{"inputs", "outputs"}`` stdin/stdout).

The format is named (``FILE:math``) or read from the first row's columns (``choices`` → choice,
``tests`` → code, else math). ``.jsonl``, ``.json`` and ``.parquet`` files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

FORMATS = ("math", "choice", "code")
LETTERS = "ABCDEFGHIJ"

#: the user message per format ({question}; choices are listed after the question)
TEMPLATES = {
    "math": "{question}\nPlease reason step by step, and put your final answer within \\boxed{{}}.",
    "choice": "{question}\n{choices}\nPlease reason step by step, and put the letter of your answer within \\boxed{{}}.",
    "code": "{question}\nWrite a Python program that reads from standard input and writes to standard output, "
    "in one ```python code block.",
}


class BenchmarkError(ValueError):
    """A benchmark file that cannot be read as its format (named with file and row)."""


@dataclass
class Problem:
    id: str
    question: str
    kind: str
    reference: str = ""  # math: the answer; choice: the letter
    choices: list[str] = field(default_factory=list)
    tests: dict | None = None

    def prompt(self, template: str) -> str:
        listed = "\n".join(f"({LETTERS[i]}) {choice}" for i, choice in enumerate(self.choices))
        return template.format(question=self.question, choices=listed)


def _rows(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        import pandas as pd

        return pd.read_parquet(path).to_dict("records")
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        return data if isinstance(data, list) else data.get("data", [])
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def split_spec(spec: str) -> tuple[str, str]:
    """``FILE[:FORMAT]`` → (file, format or "")."""
    path_text, _, kind = spec.rpartition(":") if spec.rsplit(":", 1)[-1] in FORMATS else (spec, "", "")
    return path_text, kind


def benchmark_name(spec: str) -> str:
    """The benchmark's name: its file's stem."""
    return Path(split_spec(spec)[0]).stem


def load(spec: str) -> tuple[str, list[Problem]]:
    """``FILE[:FORMAT]`` → (benchmark name: the file's stem, problems)."""
    path_text, kind = split_spec(spec)
    path = Path(path_text)
    if not path.is_file():
        raise BenchmarkError(f"--bench {spec}: no such file")
    rows = _rows(path)
    if not rows:
        raise BenchmarkError(f"{path}: no rows")
    kind = kind or ("choice" if "choices" in rows[0] else "code" if "tests" in rows[0] else "math")
    problems = []
    for number, row in enumerate(rows, 1):
        where = f"{path}:{number}"
        question = row.get("problem", row.get("question"))
        if not question:
            raise BenchmarkError(f"{where}: no 'problem' or 'question'")
        problem = Problem(str(row.get("id", number - 1)), str(question), kind)
        if kind == "math":
            if row.get("answer") in (None, ""):
                raise BenchmarkError(f"{where}: no 'answer'")
            problem.reference = str(row["answer"])
        elif kind == "choice":
            choices, answer = list(row.get("choices") or []), row.get("answer")
            if len(choices) < 2 or len(choices) > len(LETTERS):
                raise BenchmarkError(f"{where}: 'choices' must list 2 to {len(LETTERS)} options")
            letter = LETTERS[int(answer)] if isinstance(answer, int) else str(answer).strip().strip("()").upper()
            if letter not in LETTERS[: len(choices)]:
                raise BenchmarkError(f"{where}: answer {answer!r} is not one of the {len(choices)} choices")
            problem.choices, problem.reference = [str(c) for c in choices], letter
        else:
            tests = row.get("tests")
            tests = json.loads(tests) if isinstance(tests, str) else tests
            if (
                not isinstance(tests, dict)
                or not tests.get("inputs")
                or len(tests["inputs"]) != len(tests.get("outputs", []))
            ):
                raise BenchmarkError(f"{where}: 'tests' must be {{'inputs': [...], 'outputs': [...]}} of equal length")
            problem.tests = {"inputs": list(tests["inputs"]), "outputs": list(tests["outputs"])}
        problems.append(problem)
    return path.stem, problems
