"""Discovery and hook calls: failures are recorded and printed, never lost."""

from __future__ import annotations

import pytest

from reasonrl.config import ConfigError
from reasonrl.contracts import PluginInfo
from reasonrl.manager import call_each, load_errors


def test_call_each_attributes_results_in_registration_order(isolated_plugins):
    isolated_plugins("first", reasonrl_plugin_info=lambda: PluginInfo("first", "one"))
    isolated_plugins("second", reasonrl_plugin_info=lambda: PluginInfo("second", "two"))
    assert [(name, info.summary) for name, info in call_each("reasonrl_plugin_info")] == [
        ("first", "one"),
        ("second", "two"),
    ]


def test_raising_hook_is_reported_and_others_still_answer(isolated_plugins, capsys):
    def broken():
        raise RuntimeError("boom")

    isolated_plugins("bad", reasonrl_plugin_info=broken)
    isolated_plugins("good", reasonrl_plugin_info=lambda: PluginInfo("good", "fine"))
    assert [name for name, _ in call_each("reasonrl_plugin_info")] == ["good"]
    [error] = load_errors()
    assert (error.plugin, error.where) == ("bad", "reasonrl_plugin_info") and "boom" in error.error
    assert "reasonrl: ERROR in plugin 'bad'" in capsys.readouterr().err


def test_reraise_lets_a_hook_answer_with_an_exception(isolated_plugins):
    def check(config):
        raise ConfigError("x.y", "no")

    isolated_plugins("checker", reasonrl_check_config=check)
    with pytest.raises(ConfigError):
        list(call_each("reasonrl_check_config", reraise=(ConfigError,), config={}))


def test_unknown_hook_name_is_a_contract_error(isolated_plugins):
    error = isolated_plugins("typo", reasonrl_verl_registration=lambda: [])
    assert error is not None and "reasonrl_verl_registration" in error.error
    assert not isolated_plugins.manager.has_plugin("typo")


def test_marked_hook_the_contract_does_not_define_is_a_contract_error_whatever_its_name(isolated_plugins):
    # pluggy's check_pending sees every @hookimpl, also one that lost its reasonrl_ prefix
    error = isolated_plugins("unprefixed", verl_registrations=lambda: [])
    assert error is not None and error.where == "contract" and "'verl_registrations'" in error.error
    assert not isolated_plugins.manager.has_plugin("unprefixed")


def test_contract_error_leaves_nothing_registered_and_others_still_load(isolated_plugins):
    isolated_plugins("typo", reasonrl_plugin_info=lambda: PluginInfo("typo", "x"), reasonrl_typo=lambda: 1)
    assert isolated_plugins("good", reasonrl_plugin_info=lambda: PluginInfo("good", "fine")) is None
    isolated_plugins.manager.check_pending()  # the typo plugin's hooks were unregistered with it
    assert [name for name, _ in call_each("reasonrl_plugin_info")] == ["good"]
    [error] = load_errors()
    assert (error.plugin, error.where) == ("typo", "contract") and "'reasonrl_typo'" in error.error


def test_hook_with_wrong_arguments_is_rejected_by_pluggy(isolated_plugins):
    error = isolated_plugins("args", reasonrl_check_config=lambda cfg: None)
    assert error is not None and error.where == "register"


def test_duplicate_config_groups_are_refused(isolated_plugins):
    from dataclasses import dataclass

    from reasonrl.api import config_groups
    from reasonrl.contracts import ConfigGroup

    @dataclass
    class Empty:
        pass

    isolated_plugins("a", reasonrl_config_groups=lambda: [ConfigGroup("same", Empty)])
    isolated_plugins("b", reasonrl_config_groups=lambda: [ConfigGroup("same", Empty)])
    with pytest.raises(ConfigError, match="declared twice"):
        config_groups()


def test_declaration_hooks_list_every_argument_free_hook():
    import inspect

    from reasonrl import hookspecs

    every_hook = {name for name in dir(hookspecs) if name.startswith("reasonrl_")}
    with_arguments = {name for name in every_hook if inspect.signature(getattr(hookspecs, name)).parameters}
    assert with_arguments == {
        "reasonrl_check_config",
        "reasonrl_dataset_columns",
        "reasonrl_check_inputs",
        "reasonrl_prepare_rows",
        "reasonrl_request_transforms",
        "reasonrl_sft_trainer",
    }
    assert set(hookspecs.DECLARATION_HOOKS) == every_hook - with_arguments
