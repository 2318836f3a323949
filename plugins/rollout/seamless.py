"""MiMo's Seamless Rollout Engine, framework-free (MiMo-7B §3.4.1).

- :func:`fifo_early_termination` — "early termination with first-in-first-out selection": the
  step stops in-flight tasks only when the valid samples fill the batch AND every task started
  before the selected samples has finished; the selected samples are the first ``batch_size``
  valid ones in launch order. Public facade ``reasonrl.api.fifo_early_termination``; every
  scheduler in this plugin (and the benchmark's simulator) selects through it.
- :func:`tasks_to_launch` — "continuous rollout ... new tasks are launched only when the active
  ones cannot meet the step's demand given the current pass-rate statistics".
- :func:`sample_waste` / :func:`idle_ratio` — the two ratios MiMo's Table 2 reports.
"""

from __future__ import annotations

import math
from typing import Sequence


def fifo_early_termination(
    finish_times: Sequence[float | None], valid: Sequence[bool], batch_size: int
) -> tuple[list[int], float | None]:
    """MiMo's FIFO early-termination rule.

    ``finish_times[i]`` / ``valid[i]``: task ``i`` in launch order, its finish time (``None`` or
    ``inf``: not finished) and whether its sample is valid (dynamic sampling: a group with mixed
    rewards). The step stops at the first time when the tasks launched up to some task ``j`` have
    all finished and hold ``batch_size`` valid samples; ``selected`` are the launch indices of the
    first ``batch_size`` valid tasks. Returns ``([], None)`` when the batch cannot be filled.

    The first ``j`` whose prefix holds ``batch_size`` valid tasks gives the earliest stop time:
    a later prefix contains it, and its stop time (the prefix's latest finish) cannot be smaller.
    """
    if len(finish_times) != len(valid):
        raise ValueError(f"finish_times ({len(finish_times)}) and valid ({len(valid)}) differ in length")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    selected: list[int] = []
    stop_time = -math.inf
    for index, (finish, is_valid) in enumerate(zip(finish_times, valid)):
        if finish is None or math.isinf(finish) or math.isnan(finish):
            return [], None  # a task launched before the batch filled has not finished
        stop_time = max(stop_time, float(finish))
        if is_valid:
            selected.append(index)
            if len(selected) == batch_size:
                return selected, stop_time
    return [], None


def valid_rate_estimate(
    valid_finished: int, finished: int, prior_valid: float = 1.0, prior_total: float = 2.0
) -> float:
    """Live estimate of the chance that a launched task yields a valid sample: the finished
    tasks' valid share, smoothed by a Beta prior (``prior_valid`` / ``prior_total``; default
    Laplace's rule: 1/2 before anything finished), never 0 (a launch decision divides by it)."""
    if valid_finished < 0 or finished < valid_finished:
        raise ValueError(f"need 0 <= valid_finished ({valid_finished}) <= finished ({finished})")
    return max((valid_finished + prior_valid) / (finished + prior_total), 1e-6)


def tasks_to_launch(demand: int, active: int, valid_rate: float, free_slots: int | None = None) -> int:
    """How many new tasks to launch now: ``demand`` valid samples still missing from the step,
    ``active`` tasks in flight, each expected to be valid with ``valid_rate``. Launch only the
    shortfall the active tasks are not expected to cover, ``ceil((demand − active·p) / p)``,
    capped at the engine's ``free_slots``."""
    if not 0.0 < valid_rate <= 1.0:
        raise ValueError(f"valid_rate must be in (0, 1], got {valid_rate}")
    if demand < 0 or active < 0:
        raise ValueError(f"demand ({demand}) and active ({active}) must be >= 0")
    shortfall = demand - active * valid_rate
    wanted = max(0, math.ceil(shortfall / valid_rate - 1e-9))
    return wanted if free_slots is None else max(0, min(wanted, int(free_slots)))


def sample_waste(generated_tokens: float, trained_tokens: float) -> float:
    """MiMo's sample waste ratio: the share of generated tokens that no training step uses
    (discarded invalid groups, surplus finished samples, aborted partial generations)."""
    if generated_tokens <= 0:
        return 0.0
    return max(0.0, 1.0 - trained_tokens / generated_tokens)


def idle_ratio(busy_time: float, wall_time: float) -> float:
    """MiMo's GPU idle ratio: the share of the step's wall time the engine generates nothing."""
    if wall_time <= 0:
        return 0.0
    return min(1.0, max(0.0, 1.0 - busy_time / wall_time))
