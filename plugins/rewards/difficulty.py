"""Test-difficulty-driven code reward (MiMo §3.3.1, after IOI subtask scoring).

Calibration: over many solutions of a problem, test j's pass rate is p_j. The tests are
clustered into L levels by p_j (optimal 1-D k-means on the distinct pass rates, so equal
rates always share a level; fewer levels when there are fewer distinct rates), ordered
easiest (highest pass rate) → hardest. Level g carries score s_g, Σ s_g = 1 (equal split
unless given).

Rewards for one solution with per-test results ``passed``:
    strict:          Σ_g s_g · 1[every test of level g and of every easier level passes]
    soft:            Σ_j passed_j · s_{level(j)} / |level(j)|
    all_or_nothing:  1[every test passes]            (the baseline)
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Sequence

SCHEMES = ("strict", "soft", "all_or_nothing")


@dataclass(frozen=True)
class TestDifficulty:
    """A problem's calibration: JSON-serialisable, shipped with the problem (dataset column)."""

    __test__ = False  # not a pytest class

    levels: tuple[int, ...]  # per test: 0 = easiest level
    level_scores: tuple[float, ...]  # per level, easiest first; sums to 1
    pass_rates: tuple[float, ...]  # per test, over the calibration solutions
    num_solutions: int

    def to_json(self) -> dict:
        return asdict(self) | {
            "levels": list(self.levels),
            "level_scores": list(self.level_scores),
            "pass_rates": list(self.pass_rates),
        }

    @classmethod
    def from_json(cls, record: dict) -> "TestDifficulty":
        calibration = cls(
            tuple(int(x) for x in record["levels"]),
            tuple(float(x) for x in record["level_scores"]),
            tuple(float(x) for x in record.get("pass_rates", ())),
            int(record.get("num_solutions", 0)),
        )
        calibration.check()
        return calibration

    @property
    def num_levels(self) -> int:
        return len(self.level_scores)

    def check(self) -> None:
        if not self.levels or set(self.levels) != set(range(self.num_levels)):
            raise ValueError(f"levels {list(self.levels)} must use every level 0..{self.num_levels - 1}")
        if abs(sum(self.level_scores) - 1.0) > 1e-6 or min(self.level_scores) < 0:
            raise ValueError(f"level_scores {list(self.level_scores)} must be non-negative and sum to 1")


def cluster_1d(values: Sequence[float], k: int) -> list[int]:
    """Optimal k-means of ``values`` in 1-D (dynamic programming over the sorted distinct values,
    weighted by multiplicity). Returns a cluster index per value, 0 = the cluster of the
    *largest* values. Deterministic: among equal-cost splits the earliest boundary wins."""
    counts = Counter(values)
    distinct = sorted(counts)
    k = max(1, min(k, len(distinct)))
    weights = [counts[d] for d in distinct]
    m = len(distinct)
    # prefix sums for O(1) weighted SSE of distinct[i..j]
    s0, s1, s2 = [0.0], [0.0], [0.0]
    for value, weight in zip(distinct, weights):
        s0.append(s0[-1] + weight)
        s1.append(s1[-1] + weight * value)
        s2.append(s2[-1] + weight * value * value)

    def sse(i: int, j: int) -> float:  # inclusive i..j
        n, total, squares = s0[j + 1] - s0[i], s1[j + 1] - s1[i], s2[j + 1] - s2[i]
        return max(0.0, squares - total * total / n)

    inf = float("inf")
    cost = [[inf] * m for _ in range(k)]
    start = [[0] * m for _ in range(k)]
    for j in range(m):
        cost[0][j] = sse(0, j)
    for c in range(1, k):
        for j in range(c, m):
            for i in range(c, j + 1):  # cluster c covers distinct[i..j]
                candidate = cost[c - 1][i - 1] + sse(i, j)
                if candidate < cost[c][j] - 1e-12:
                    cost[c][j], start[c][j] = candidate, i
    # backtrack: cluster of each distinct value, ascending order
    ascending_cluster = [0] * m
    j = m - 1
    for c in range(k - 1, -1, -1):
        i = start[c][j] if c > 0 else 0
        for position in range(i, j + 1):
            ascending_cluster[position] = c
        j = i - 1
    # relabel: 0 = largest values
    cluster_of = {d: k - 1 - ascending_cluster[index] for index, d in enumerate(distinct)}
    return [cluster_of[v] for v in values]


def calibrate(
    verdicts: Sequence[Sequence[bool]], levels: int = 3, level_scores: Sequence[float] | None = None
) -> TestDifficulty:
    """Calibrate one problem from a solutions × tests matrix of pass/fail.

    ``level_scores`` (easiest first, length ``levels``) defaults to an equal split. If the
    pass rates have fewer distinct values than ``levels``, fewer levels are made and the
    first scores are kept, renormalised to sum to 1.
    """
    if levels < 1:
        raise ValueError(f"levels = {levels}: must be ≥ 1")
    rows = [list(map(bool, row)) for row in verdicts]
    if not rows or not rows[0]:
        raise ValueError("calibration needs at least one solution and one test")
    if any(len(row) != len(rows[0]) for row in rows):
        raise ValueError("every solution must have a verdict for every test")
    if level_scores is not None and (len(level_scores) != levels or min(level_scores) < 0 or sum(level_scores) <= 0):
        raise ValueError(f"level_scores {list(level_scores)} must be {levels} non-negative numbers with a positive sum")
    tests = len(rows[0])
    pass_rates = [sum(row[j] for row in rows) / len(rows) for j in range(tests)]
    test_levels = cluster_1d(pass_rates, levels)
    found = max(test_levels) + 1
    if level_scores is None:
        scores = [1.0 / found] * found
    else:
        kept = [float(s) for s in level_scores[:found]]
        if sum(kept) <= 0:
            raise ValueError(f"the first {found} level_scores sum to 0: nothing to earn")
        scores = [s / sum(kept) for s in kept]
    return TestDifficulty(tuple(test_levels), tuple(scores), tuple(pass_rates), len(rows))


def reward(passed: Sequence[bool], calibration: TestDifficulty, scheme: str = "strict") -> float:
    """One solution's reward under ``scheme`` (see the module docstring)."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme {scheme!r}: must be one of {SCHEMES}")
    if len(passed) != len(calibration.levels):
        raise ValueError(f"{len(passed)} results for {len(calibration.levels)} calibrated tests")
    passed = [bool(p) for p in passed]
    if scheme == "all_or_nothing":
        return 1.0 if all(passed) else 0.0
    if scheme == "soft":
        sizes = [calibration.levels.count(g) for g in range(calibration.num_levels)]
        return sum(calibration.level_scores[g] / sizes[g] for g, ok in zip(calibration.levels, passed) if ok)
    earned = 0.0
    for score, level_passed in zip(calibration.level_scores, levels_passed(passed, calibration)):
        if not level_passed:
            break
        earned += score
    return earned


def levels_passed(passed: Sequence[bool], calibration: TestDifficulty) -> list[bool]:
    """Per level (easiest first): did every test of the level pass?"""
    return [
        all(ok for level, ok in zip(calibration.levels, passed) if level == g) for g in range(calibration.num_levels)
    ]


#: A verl row's reference solutions' verdicts on its tests (solutions × tests), as data writers put them.
VERDICTS_FIELD = "solution_test_verdicts"


def calibrate_rows(rows: list[dict], levels: int = 3) -> None:
    """Turn each code row's ``extra_info.solution_test_verdicts`` into its MiMo §3.3.1 calibration
    (``difficulty`` in its JSON ground truth, what the code reward reads); the verdicts are consumed
    (the written row is the code reward's format). A calibration already there is kept."""
    for row in rows:
        extra = row.get("extra_info") or {}
        truth = (row.get("reward_model") or {}).get("ground_truth")
        if extra.get(VERDICTS_FIELD) is None or not isinstance(truth, str) or not truth.lstrip().startswith("{"):
            continue
        verdicts = extra.pop(VERDICTS_FIELD)
        spec = json.loads(truth)
        if "difficulty" not in spec:
            spec["difficulty"] = calibrate(verdicts, levels=levels).to_json()
            row["reward_model"]["ground_truth"] = json.dumps(spec)
