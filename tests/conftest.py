"""Unit-test fixtures: an isolated plugin manager holding only the plugins a test gives it."""

from __future__ import annotations

import types

import pytest

from reasonrl import bridges, manager, patching


@pytest.fixture
def isolated_plugins(monkeypatch):
    """Replace the process-wide manager by an empty one; ``add(name, **hooks)`` adds a plugin
    module whose attributes are the given hook functions (marked as hook implementations)."""
    from reasonrl.hookspecs import hookimpl

    fresh = manager.new_plugin_manager(discover=False)
    monkeypatch.setattr(manager, "_manager", fresh)
    monkeypatch.setattr(manager, "_errors", [])
    monkeypatch.setattr(bridges, "STATUS", {"verl": bridges.BridgeStatus(), "vllm": bridges.BridgeStatus()})
    monkeypatch.setattr(patching, "_status", {})

    def add(name: str, **hooks):
        module = types.ModuleType(f"test_plugin_{name}")
        for hook_name, function in hooks.items():
            setattr(module, hook_name, hookimpl(function))
        return manager.register_plugin(fresh, module, name)

    add.manager = fresh
    return add
