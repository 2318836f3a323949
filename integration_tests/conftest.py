"""Fixtures for integration tests: real upstream packages, real entry-point discovery.

Third-party plugins are put in front of the real discovery code with a ``.dist-info``
folder on ``PYTHONPATH`` (``reasonrl.testing.distributions``), in fresh subprocesses, so
that ``import verl`` runs exactly as it does in a user's process or a Ray worker.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from reasonrl.testing.distributions import entry_points_from_pyproject, write_dist_info

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_PLUGIN = REPO / "docs" / "examples" / "reasonrl_example_plugin"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def example_plugin_path(tmp_path_factory) -> list[Path]:
    """sys.path entries that make the worked example an installed plugin."""
    site = tmp_path_factory.mktemp("example_site")
    name, entry_points = entry_points_from_pyproject(EXAMPLE_PLUGIN / "pyproject.toml")
    write_dist_info(site, name, entry_points)
    return [site, EXAMPLE_PLUGIN]


@pytest.fixture(scope="session")
def broken_plugin_path(tmp_path_factory) -> list[Path]:
    site = tmp_path_factory.mktemp("broken_site")
    write_dist_info(site, "reasonrl-broken-plugin", {"reasonrl.plugins": {"broken": "reasonrl_broken_plugin"}})
    return [site, FIXTURES / "broken_plugin"]


@pytest.fixture(scope="session")
def megatron_spec_plugin_path(tmp_path_factory) -> list[Path]:
    site = tmp_path_factory.mktemp("megatron_site")
    write_dist_info(
        site,
        "reasonrl-megatron-spec-plugin",
        {"reasonrl.plugins": {"megatron_spec_fixture": "reasonrl_megatron_spec_plugin"}},
    )
    return [site, FIXTURES / "megatron_spec_plugin"]


@pytest.fixture
def run_tag():
    """A fresh tag for a ``reasonrl train`` launch (``reasonrl.testing.cpu_runs``); whatever
    still carries it at the end of the test is killed, after the test's own assertions."""
    from reasonrl.testing.cpu_runs import kill_tagged

    tag = uuid.uuid4().hex
    yield tag
    kill_tagged(tag)
