"""Sampled-answer evaluation as the reports score it (framework-free).

The reports sample several answers per problem and average (MiMo §3.5.1: avg@32 on AIME,
avg@8 elsewhere; LongCat §4: Mean@32; Llama-Nemotron §7.1: up to 16 samples, average pass@1).
verl already logs the average (``mean@n``) and a bootstrap ``best@k``; this adds the unbiased
pass@k estimator of Chen et al. (2021, "Evaluating Large Language Models Trained on Code"):

    pass@k = E_problems[ 1 − C(n − c, k) / C(n, k) ]      (n samples, c of them correct)
"""

from __future__ import annotations

from collections import defaultdict
from typing import Hashable, Iterable, Sequence

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased probability that at least one of k answers drawn from the n (c correct) is correct."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def reported_ks(n: int) -> list[int]:
    """The k logged for n samples per problem: 1, 2, 4, … below n, and n."""
    ks, k = [], 1
    while k < n:
        ks.append(k)
        k *= 2
    return [*ks, n] if n >= 1 else []


def pass_at_k_by_source(
    sources: Sequence[str], problems: Sequence[Hashable], correct: Iterable[bool]
) -> dict[str, dict[int, float]]:
    """Per data source, pass@k averaged over its problems, for every k in :func:`reported_ks` of
    the smallest number of samples any of its problems has."""
    tally: dict[str, dict[Hashable, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for source, problem, ok in zip(sources, problems, correct):
        counts = tally[source][problem]
        counts[0] += 1
        counts[1] += int(bool(ok))
    out = {}
    for source, by_problem in tally.items():
        n = min(samples for samples, _ in by_problem.values())
        out[source] = {
            k: float(np.mean([pass_at_k(samples, hits, k) for samples, hits in by_problem.values()]))
            for k in reported_ks(n)
        }
    return out


def validation_pass_at_k(sources, problems, reward_extra_info: dict, key: str = "acc") -> dict[str, float]:
    """verl-style metric names, ``val-aux/<source>/<key>/pass@<k>``, from the validation's
    per-sample data sources, prompt uids and ``reward_extra_info[key]`` (correct when >= 1)."""
    values = reward_extra_info.get(key)
    if values is None or len(values) != len(problems):
        return {}
    correct = [float(value) >= 1.0 for value in values]
    return {
        f"val-aux/{source}/{key}/pass@{k}": value
        for source, by_k in pass_at_k_by_source(list(sources), list(problems), correct).items()
        for k, value in by_k.items()
    }
