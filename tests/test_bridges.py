"""Bridges apply each registration once per process and report every failure."""

from __future__ import annotations

from importlib.metadata import entry_points

from reasonrl.bridges import STATUS, run_bridge  # noqa: F401  (STATUS is patched per test)
from reasonrl.contracts import Registration
from reasonrl.manager import load_errors


def test_registrations_applied_once_and_failures_recorded(isolated_plugins, capsys):
    calls: list[str] = []

    def fail():
        raise ImportError("missing kernel")

    isolated_plugins(
        "demo",
        reasonrl_verl_registrations=lambda: [
            Registration("verl", "policy_loss", "good", lambda: calls.append("good")),
            Registration("verl", "policy_loss", "bad", fail),
        ],
        reasonrl_vllm_registrations=lambda: [Registration("vllm", "model", "m", lambda: calls.append("vllm"))],
    )
    status = run_bridge("verl")
    assert calls == ["good"]
    assert [r.name for _, r in status.applied] == ["good"] and [r.name for _, r in status.failed] == ["bad"]
    assert run_bridge("verl") is status and calls == ["good"], "second run in one process is a no-op"
    [error] = load_errors()
    assert "missing kernel" in error.error and "policy_loss 'bad'" in error.where
    assert "reasonrl: ERROR" in capsys.readouterr().err


def test_vllm_general_plugin_is_idempotent(isolated_plugins):
    from reasonrl.bridges.vllm import register

    calls: list[str] = []
    isolated_plugins(
        "demo", reasonrl_vllm_registrations=lambda: [Registration("vllm", "model", "m", lambda: calls.append("m"))]
    )
    register()
    register()
    assert calls == ["m"]


def test_registration_declaring_the_wrong_upstream_is_reported(isolated_plugins):
    isolated_plugins("confused", reasonrl_verl_registrations=lambda: [Registration("vllm", "model", "m", lambda: None)])
    status = run_bridge("verl")
    assert status.applied == [] and "declares upstream 'vllm'" in load_errors()[0].error


def test_entry_points_point_at_the_bridges():
    verl_targets = {ep.name: ep.value for ep in entry_points(group="verl.plugins")}
    vllm_targets = {ep.name: ep.value for ep in entry_points(group="vllm.general_plugins")}
    assert verl_targets["reasonrl"] == "reasonrl.bridges.verl"
    assert vllm_targets["reasonrl"] == "reasonrl.bridges.vllm:register"
    # vLLM loads general plugins with ep.load() and calls the result, as here.
    [vllm_entry] = [ep for ep in entry_points(group="vllm.general_plugins") if ep.name == "reasonrl"]
    assert callable(vllm_entry.load())
