"""REASONRL_PLUGINS / REASONRL_DISABLE_PLUGINS: plugins switched off with pluggy's own blocking."""

from __future__ import annotations

import json

import pytest

from reasonrl import manager
from reasonrl.cli.plugins_command import print_report
from reasonrl.config import ConfigError, validate_reasonrl_section
from reasonrl.manager import ALLOW_ENV, DENY_ENV, Disabled, new_plugin_manager
from reasonrl.testing.fresh_process import python_fresh, reasonrl_fresh


@pytest.fixture
def discover(monkeypatch):
    """``discover(**env)``: a manager filled from the real entry points with the switches in ``env``."""
    monkeypatch.setattr(manager, "_errors", [])
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    monkeypatch.delenv(DENY_ENV, raising=False)

    def run(**env: str) -> manager.PluginManager:
        for variable, value in env.items():
            monkeypatch.setenv(variable, value)
        return new_plugin_manager(discover=True)

    return run


def loaded(plugin_manager) -> set[str]:
    return {name for name, plugin in plugin_manager.list_name_plugin() if plugin is not None}


def test_allow_list_loads_only_the_named_plugins_and_the_patches(discover):
    found = discover(REASONRL_PLUGINS="rewards, mtp")
    assert loaded(found) == {"rewards", "mtp", "patches"}  # patches: upstream fixes, not a technique
    assert found.is_blocked("sampling") and found.is_blocked("objectives")
    assert found.disabled["sampling"].reason == "REASONRL_PLUGINS=rewards, mtp does not name it"
    assert manager._errors == []


def test_empty_allow_list_loads_no_technique(discover):
    assert loaded(discover(REASONRL_PLUGINS="")) == {"patches"}


def test_deny_list_can_block_the_patches_too(discover):
    found = discover(REASONRL_DISABLE_PLUGINS="patches,mtp")
    assert found.is_blocked("patches") and found.is_blocked("mtp") and "rewards" in loaded(found)
    assert found.disabled["mtp"].reason == "REASONRL_DISABLE_PLUGINS=patches,mtp"


def test_a_name_no_plugin_has_is_a_load_error_naming_the_switch(discover, capsys):
    found = discover(REASONRL_DISABLE_PLUGINS="samplng")
    assert "sampling" in loaded(found)  # the typo turned nothing off ...
    [error] = manager._errors  # ... and says so
    assert (error.plugin, error.where) == ("samplng", DENY_ENV) and "'sampling'" in error.error
    assert "reasonrl: ERROR in plugin 'samplng' (REASONRL_DISABLE_PLUGINS)" in capsys.readouterr().err
    discover(REASONRL_PLUGINS="rewards,rewrds")
    assert [(e.plugin, e.where) for e in manager._errors][1:] == [("rewrds", ALLOW_ENV)]


_DENIED = """
import json, sys
from reasonrl.config import validate_config
from reasonrl.config import ConfigError
from reasonrl.manager import call_each, disabled_plugins, get_plugin_manager, load_errors
found = get_plugin_manager()
off = disabled_plugins(found)
try:
    validate_config({"reasonrl": {"sampling": {}}})
    refused = ""
except ConfigError as error:
    refused = str(error)
print(json.dumps({
    "blocked": found.is_blocked("sampling"),
    "imported": sorted(m for m in sys.modules if m.startswith("reasonrl.plugins.sampling")),
    "answered": [name for name, _ in call_each("reasonrl_plugin_info")],
    "errors": [e.error for e in load_errors()],
    "refused": refused,
    "off": {name: [switch.reason, switch.remedy] for name, switch in off.items()},
}))
"""


def test_denied_plugin_is_never_imported_and_its_config_group_is_refused_naming_the_switch(monkeypatch):
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    result = python_fresh(_DENIED, env={DENY_ENV: "sampling"})
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["blocked"] and out["imported"] == [] and not [e for e in out["errors"] if "sampling" in e]
    assert "sampling" not in out["answered"] and "rewards" in out["answered"]
    # merging requires sampling: switched off with it, by the same switch, not reported as an error
    assert "merging" not in out["answered"] and out["off"]["merging"] == [
        "it requires 'sampling', which is disabled: REASONRL_DISABLE_PLUGINS=sampling",
        "remove 'sampling' from REASONRL_DISABLE_PLUGINS (or unset it)",
    ]
    assert out["refused"] == (
        "reasonrl.sampling: plugin 'sampling' is disabled (REASONRL_DISABLE_PLUGINS=sampling): "
        "remove 'sampling' from REASONRL_DISABLE_PLUGINS (or unset it) to use this config group"
    )


def test_config_group_of_a_plugin_left_out_by_the_allow_list_names_the_switch(isolated_plugins):
    isolated_plugins.manager.disable(Disabled("sampling", ALLOW_ENV, "rewards"))
    with pytest.raises(
        ConfigError, match=r"plugin 'sampling' is disabled \(REASONRL_PLUGINS=rewards does not name it\)"
    ):
        validate_reasonrl_section({"sampling": {}}, {})


def test_group_named_otherwise_than_its_disabled_plugin_says_it_may_belong_to_one(isolated_plugins):
    isolated_plugins.manager.disable(Disabled("objectives", DENY_ENV, "objectives"))
    isolated_plugins.manager.disable(Disabled("mtp", ALLOW_ENV, "rewards"))
    with pytest.raises(ConfigError) as info:
        validate_reasonrl_section({"objective": {}}, {})
    assert info.value.key == "reasonrl.objective"
    assert "no loaded plugin declares this config group; it may belong to a plugin switched off: " in str(info.value)
    assert "objectives (REASONRL_DISABLE_PLUGINS=objectives)" in str(info.value)
    assert "mtp (not in REASONRL_PLUGINS=rewards)" in str(info.value)


def test_reasonrl_plugins_lists_disabled_plugins_with_the_switch(monkeypatch, capsys):
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    result = reasonrl_fresh(["plugins", "--json"], env={DENY_ENV: "sampling"})
    report = json.loads(result.stdout)
    assert report["disabled"] == [
        {
            "plugin": "merging",  # it requires sampling
            "entry_point": "reasonrl.plugins.merging",
            "reason": "it requires 'sampling', which is disabled: REASONRL_DISABLE_PLUGINS=sampling",
        },
        {
            "plugin": "sampling",
            "entry_point": "reasonrl.plugins.sampling",
            "reason": "REASONRL_DISABLE_PLUGINS=sampling",
        },
    ]
    assert "sampling" not in report["plugins"] and "rewards" in report["plugins"]
    assert not [e for e in report["errors"] if e["plugin"] == "sampling" or e["where"] in (ALLOW_ENV, DENY_ENV)]
    print_report(report)
    assert "sampling  [reasonrl.plugins.sampling]: REASONRL_DISABLE_PLUGINS=sampling" in capsys.readouterr().out
