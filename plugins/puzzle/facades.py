"""The puzzle plugin's public function, offered as ``reasonrl.api.solve_architecture``."""

from __future__ import annotations


def solve_architecture(quality, resources, budgets):
    """Puzzle's search (Llama-Nemotron §2): the variant index per layer that minimises the summed
    ``quality`` cost (layers × variants; ``numpy.inf`` = not allowed) with every
    ``resources[name]`` (layers × variants) summing to at most ``budgets[name]``. Exact
    (Lagrangian-bounded enumeration, a HiGHS MILP as fallback: the search the pipeline runs); raises ``InfeasibleBudget`` (a ValueError) when no choice fits."""
    from reasonrl.plugins.puzzle.search import solve

    return solve(quality, resources, budgets).choice.tolist()
