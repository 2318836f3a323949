"""``reasonrl.api``: explicit re-exports of the techniques' public functions (no lookup by name),
the same objects the plugins offer and use, and every plugin that calls another one through it
declares that plugin (issue 43.5)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import reasonrl.api as api

REPO = Path(__file__).resolve().parent.parent


def _reexports() -> dict[str, str]:
    """``name -> owning plugin`` as api.py's own import statements say."""
    owners = {}
    for node in ast.parse(Path(api.__file__).read_text()).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("reasonrl.plugins."):
            owners.update({alias.name: node.module.split(".")[2] for alias in node.names})
    return owners


def test_every_plugin_facade_is_an_explicit_reexport_of_the_same_function():
    offered = api.functions()
    assert offered, "the built-in plugins offer facades"
    assert not hasattr(api, "__getattr__"), "no name-resolved facades"
    owners = _reexports()
    for name, (plugin, function) in offered.items():
        assert owners.get(name) == plugin, f"reasonrl.api must import {name} from plugin {plugin}"
        assert getattr(api, name) is function and name in api.__all__


def test_every_reasonrl_function_of_a_plugin_module_is_a_hook_implementation():
    """A ``reasonrl_*`` function without ``@hookimpl`` is silently not a hook (the rollout
    plugin's ``reasonrl_api_functions`` was: ``functions()`` never listed its facade)."""
    from reasonrl.hookspecs import PROJECT

    for folder in sorted(p for p in (REPO / "plugins").iterdir() if (p / "__init__.py").exists()):
        module = importlib.import_module(f"reasonrl.plugins.{folder.name}")
        for name, value in vars(module).items():
            if name.startswith("reasonrl_") and callable(value):
                assert hasattr(value, f"{PROJECT}_impl"), f"plugin {folder.name}: {name} lacks @hookimpl"
    assert "fifo_early_termination" in api.functions()


def test_plugins_that_call_another_plugin_through_the_api_declare_it():
    owners = _reexports()
    for folder in sorted(p for p in (REPO / "plugins").iterdir() if (p / "__init__.py").exists()):
        used = set()
        for source in folder.rglob("*.py"):
            if "tests" in source.relative_to(folder).parts:
                continue
            for node in ast.walk(ast.parse(source.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module == "reasonrl.api":
                    used |= {owners[a.name] for a in node.names if a.name in owners}
        needed = used - {folder.name}
        module = importlib.import_module(f"reasonrl.plugins.{folder.name}")
        info = module.reasonrl_plugin_info() if hasattr(module, "reasonrl_plugin_info") else None
        declared = set(info.requires) if info else set()
        assert needed <= declared, f"plugin {folder.name} calls {sorted(needed)} through reasonrl.api: declare requires"


def test_a_plugin_whose_requirement_is_not_loaded_is_reported_and_unregistered(isolated_plugins):
    from reasonrl import manager
    from reasonrl.contracts import PluginInfo

    isolated_plugins("needy", reasonrl_plugin_info=lambda: PluginInfo("needy", "s", requires=("absent",)))
    isolated_plugins("fine", reasonrl_plugin_info=lambda: PluginInfo("fine", "s"))
    manager.check_requirements(isolated_plugins.manager)
    names = {name for name, plugin in isolated_plugins.manager.list_name_plugin() if plugin is not None}
    assert names == {"fine"}
    assert any(e.plugin == "needy" and "needs plugin(s) ['absent']" in e.error for e in manager.load_errors())


def test_a_plugin_whose_requirement_was_itself_dropped_is_dropped_too(isolated_plugins):
    from reasonrl import manager
    from reasonrl.contracts import PluginInfo

    isolated_plugins("top", reasonrl_plugin_info=lambda: PluginInfo("top", "s", requires=("middle",)))
    isolated_plugins("middle", reasonrl_plugin_info=lambda: PluginInfo("middle", "s", requires=("absent",)))
    manager.check_requirements(isolated_plugins.manager)
    names = {name for name, plugin in isolated_plugins.manager.list_name_plugin() if plugin is not None}
    assert names == set()
    assert any(e.plugin == "top" and "'middle' is not loaded" in e.error for e in manager.load_errors())
