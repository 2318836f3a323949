"""How the test run is split over two pytest-xdist workers (the README's test command:
``-n 2 --dist loadgroup --no-loadscope-reorder``; CI has 2 cores).

xdist hands a free worker the next test in collection order, or a whole ``xdist_group``:
- a module whose tests share a fixture wider than one test (an engine started once per module,
  a trained model) is one group, so that the fixture is built once, on one worker;
- the longest tests come first (longest-processing-time-first scheduling), so that no
  ten-minute test starts while the other worker is finishing: ``LONGEST_FIRST``, read from CI's
  ``--durations``. Order only: every test runs, with or without xdist.
"""

from __future__ import annotations

import pytest

#: test files, longest first (CI's --durations, 2026-11-28: 540 s, 4 × 250-290 s, ...)
LONGEST_FIRST = (
    "integration_tests/merging/test_domain_parallel.py",
    "integration_tests/test_cpu_main_job.py",
    "integration_tests/mtp/test_mtp_main_job.py",
    "integration_tests/puzzle/test_puzzle_pipeline.py",
    "integration_tests/mtp/test_mtp_vllm.py",
    "integration_tests/test_plugin_alone.py",
)
SHARED_SCOPES = {"module", "class", "package"}


def _shares_a_fixture(item: pytest.Item) -> bool:
    """A fixture of module/class/package scope, or a session fixture defined in the test's own module."""
    module, info = getattr(item, "module", None), getattr(item, "_fixtureinfo", None)
    if info is None:  # not a python test function (a doctest, say): nothing shared
        return False
    for definitions in info.name2fixturedefs.values():
        for definition in definitions:
            if definition.scope in SHARED_SCOPES:
                return True
            if (
                definition.scope == "session"
                and module
                and getattr(definition.func, "__module__", "") == module.__name__
            ):
                return True
    return False


def _rank(item: pytest.Item) -> tuple[int, int]:
    path = item.nodeid.split("::")[0]
    if path in LONGEST_FIRST:
        return (0, LONGEST_FIRST.index(path))
    return (1 if path.startswith("integration_tests/") else 2, 0)  # integration tests take longer than unit tests


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _shares_a_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    items.sort(key=_rank)  # stable: within a rank, collection order
