"""A bare ``import verl`` (no reasonrl import) applies reasonrl's registrations, in a fresh
process exactly like a Ray worker's; broken plugins are reported, never swallowed."""

from __future__ import annotations

import json

import pytest

from reasonrl.testing.fresh_process import python_fresh, reasonrl_fresh

pytestmark = pytest.mark.integration

BARE_IMPORT = """
import sys, verl
from verl.plugin.platform import PlatformRegistry
from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY

print("cpu_platform" if PlatformRegistry.get("cpu") is not None else "no-cpu-platform")
print("example_loss" if "example_reinforce" in POLICY_LOSS_REGISTRY else "no-example-loss")
print("reasonrl imported by verl:", "reasonrl.bridges.verl" in sys.modules)
"""


def test_bare_import_verl_registers_builtin_and_third_party(example_plugin_path):
    result = python_fresh(BARE_IMPORT, example_plugin_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "cpu_platform" in lines
    assert "example_loss" in lines
    assert "reasonrl imported by verl: True" in lines
    assert "reasonrl: ERROR" not in result.stderr


def test_verl_plugins_disabled_means_no_registration():
    # Control for the test above: the registration really comes from verl's entry-point loading.
    result = python_fresh(BARE_IMPORT, env={"VERL_USE_EXTERNAL_PLUGINS": "none"})
    assert result.returncode == 0, result.stderr
    assert "no-cpu-platform" in result.stdout.splitlines()


def test_cpu_platform_selected_by_env_in_fresh_process():
    code = (
        "import verl\n"
        "from verl.utils.device import get_device_name, get_nccl_backend, get_resource_name\n"
        "print(get_device_name(), get_nccl_backend(), get_resource_name())\n"
    )
    result = python_fresh(code, env={"VERL_PLATFORM": "cpu"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["cpu", "gloo", "GPU"]


def test_broken_plugin_is_reported_loudly_on_import_verl(broken_plugin_path):
    result = python_fresh("import verl; print('imported')", broken_plugin_path)
    # verl itself keeps working (its loader swallows errors) ...
    assert result.returncode == 0 and "imported" in result.stdout
    # ... but reasonrl's bridge prints the failure, naming plugin and cause.
    assert "reasonrl: ERROR in plugin 'broken'" in result.stderr
    assert "reasonrl_dependency_that_is_not_installed" in result.stderr


def test_reasonrl_plugins_lists_registrations_and_errors(example_plugin_path, broken_plugin_path):
    result = reasonrl_fresh(["plugins", "--check", "--json"], [*example_plugin_path, *broken_plugin_path])
    assert result.returncode == 1, "a load error must make `reasonrl plugins` fail"
    report = json.loads(result.stdout)
    assert report["verl_bridge_ran"] is True
    assert report["upstream"]["verl"] == "0.9.1"
    registrations = {
        (p, r["kind"], r["name"]): r["state"]
        for p, plugin in report["plugins"].items()
        for r in plugin["registrations"]
    }
    assert registrations[("cpu_platform", "platform", "cpu")] == "registered"
    assert registrations[("example_reinforce", "policy_loss", "example_reinforce")] == "registered"
    assert report["plugins"]["example_reinforce"]["config_groups"] == ["reasonrl.example_reinforce"]
    [error] = report["errors"]
    assert error["plugin"] == "broken" and "reasonrl_dependency_that_is_not_installed" in error["error"]


def test_reasonrl_plugins_without_check_lists_declared_registrations_without_importing_verl(example_plugin_path):
    code = (
        "import json, sys\nfrom reasonrl.cli.plugins_command import collect_report\n"
        "report = collect_report()\nprint(json.dumps([report, 'verl' in sys.modules, 'torch' in sys.modules]))"
    )
    result = python_fresh(code, example_plugin_path)
    assert result.returncode == 0, result.stderr
    report, verl_imported, torch_imported = json.loads(result.stdout)
    assert not verl_imported and not torch_imported, "listing plugins must not import verl or torch"
    assert report["verl_bridge_ran"] is False and report["verl_bridge_installed"] is True
    states = {(p, r["name"]): r["state"] for p, plugin in report["plugins"].items() for r in plugin["registrations"]}
    assert states[("cpu_platform", "cpu")] == "declared"
    assert states[("example_reinforce", "example_reinforce")] == "declared"
    patches = {patch["name"]: patch["status"] for patch in report["patches"]}
    assert patches["verl-cpu-process-group"] == "would-apply"


def test_reasonrl_plugins_human_output(example_plugin_path):
    result = reasonrl_fresh(["plugins"], example_plugin_path)
    assert result.returncode == 0, result.stderr
    assert "cpu_platform" in result.stdout and "example_reinforce" in result.stdout
    assert "Load errors (0)" in result.stdout


def test_train_refuses_to_start_with_a_broken_plugin(broken_plugin_path):
    code = "from reasonrl.cli.train import check_verl_bridge\ncheck_verl_bridge()\n"
    result = python_fresh(code, broken_plugin_path)
    assert result.returncode != 0
    assert "1 reasonrl plugin failure(s)" in result.stderr and "broken" in result.stderr
    allowed = python_fresh(code, broken_plugin_path, env={"REASONRL_ALLOW_PLUGIN_ERRORS": "1"})
    assert allowed.returncode == 0, allowed.stderr
