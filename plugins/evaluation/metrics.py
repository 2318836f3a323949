"""avg@k, unbiased pass@k and cons@k over n generations per problem.

    avg@n  = mean over problems of c / n                     (the reports' "avg@32", "Mean@32")
    pass@k = mean over problems of 1 − C(n − c, k) / C(n, k) (Chen et al. 2021; reasonrl.evaluation)
    cons@n = mean over problems of [the most frequent answer among the n is right]
             (majority vote; a tie goes to the answer given first; empty answers do not vote)

n samples per problem, c of them correct.
"""

from __future__ import annotations

from collections import Counter

from reasonrl.evaluation import pass_at_k, reported_ks


def majority(answers: list[str]) -> str:
    counts = Counter(a for a in answers if a)
    if not counts:
        return ""
    best = max(counts.values())
    return next(a for a in answers if a and counts[a] == best)


def summarize(per_problem: list[tuple[list[bool], bool | None]]) -> dict[str, float]:
    """``per_problem``: (each sample correct?, the majority answer correct? — None where cons is not
    defined, as for code) → ``{"problems", "n", "avg@n", "pass@k"..., "cons@n"}``."""
    n = min(len(correct) for correct, _ in per_problem)
    out: dict[str, float] = {"problems": len(per_problem), "n": n}
    out[f"avg@{n}"] = sum(sum(c) / len(c) for c, _ in per_problem) / len(per_problem)
    for k in reported_ks(n):
        out[f"pass@{k}"] = sum(pass_at_k(len(c), sum(c), k) for c, _ in per_problem) / len(per_problem)
    votes = [vote for _, vote in per_problem if vote is not None]
    if votes:
        out[f"cons@{n}"] = sum(votes) / len(votes)
    return out
