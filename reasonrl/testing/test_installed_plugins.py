"""The contract suite, run against every installed reasonrl plugin.

``pytest --pyargs reasonrl.testing`` checks your plugin as soon as it is installed (its
``reasonrl.plugins`` entry point is visible); reasonrl's own CI runs it on the built-ins.
"""

from __future__ import annotations

import importlib

import pytest

from reasonrl.testing.contract import (
    check_declarations,
    check_registrations_idempotent,
    check_upstream_free,
    installed_plugins,
)

PLUGINS = installed_plugins()


def _load(module: str):
    return importlib.import_module(module)


@pytest.mark.parametrize(("name", "module"), PLUGINS, ids=[name for name, _ in PLUGINS])
def test_declarations_keep_the_contract(name: str, module: str) -> None:
    assert check_declarations(_load(module), name) == []


@pytest.mark.parametrize(("name", "module"), PLUGINS, ids=[name for name, _ in PLUGINS])
def test_plugin_module_imports_no_upstream(name: str, module: str) -> None:
    assert check_upstream_free(module) == []


@pytest.mark.parametrize(("name", "module"), PLUGINS, ids=[name for name, _ in PLUGINS])
def test_verl_registrations_apply_twice(name: str, module: str) -> None:
    assert check_registrations_idempotent(_load(module), name, "verl") == []
