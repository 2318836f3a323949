"""How the test run is split over two pytest-xdist workers (the README's test command:
``-n 2 --dist loadscope --no-loadscope-reorder``; CI has 2 cores).

xdist hands a free worker the next test module in collection order (loadscope: a module's tests
run on one worker, so a fixture it shares — an engine started once per module, a trained
model — is built once). This file orders the modules longest first (longest-processing-time-first
scheduling), so that no ten-minute module starts while the other worker is finishing:
``LONGEST_FIRST``, read from CI's ``--durations``. Order only: every test runs, with or without xdist.

(``--dist loadgroup`` would let a module's independent tests spread; pytest-xdist 3.8 marks a
group by rewriting ``item._nodeid``, which pytest 9.2's ``nodeid`` no longer reads, so groups are
silently ignored there.)
"""

from __future__ import annotations

import os

import pytest

# Two workers share two cores: each test process (and what it starts) keeps one OpenMP thread. With
# one thread per core, in-process torch work spin-waits against the other worker's launch (Puzzle's
# 91 s run once took over 10 minutes so); set before any test imports torch. Explicit values win.
os.environ.setdefault("OMP_NUM_THREADS", "1")

#: test modules, longest first (--durations on a slow 2-core machine, 2026-11-29: main job 3 × ~450 s,
#: plugins lifted out 11 tests ~1,200 s, Megatron on CPU 3 launches, the MTP modules, Puzzle's pipeline;
#: opt-in modules, run with --run-slow, after them)
LONGEST_FIRST = (
    "integration_tests/test_cpu_main_job.py",
    "integration_tests/test_plugin_alone.py",
    "integration_tests/cpu_platform/test_megatron_cpu.py",
    "integration_tests/mtp/test_mtp_vllm.py",
    "integration_tests/mtp/test_mtp_main_job.py",
    "integration_tests/mtp/test_mtp_megatron.py",
    "integration_tests/puzzle/test_puzzle_pipeline.py",
    "integration_tests/merging/test_domain_parallel.py",
    "integration_tests/test_ray_nodes.py",
    "integration_tests/rollout/test_dora.py",
)


def _rank(item: pytest.Item) -> tuple[int, int]:
    path = item.nodeid.split("::")[0]
    if path in LONGEST_FIRST:
        return (0, LONGEST_FIRST.index(path))
    return (1 if path.startswith("integration_tests/") else 2, 0)  # integration tests take longer than unit tests


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", help="also run the opt-in checks marked slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--run-slow"):  # opt-in checks: deselected (reported as such), not skipped
        slow = [item for item in items if item.get_closest_marker("slow")]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if not item.get_closest_marker("slow")]
    items.sort(key=_rank)  # stable: within a rank, collection order
