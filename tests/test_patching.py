"""Patches: applied once, refused outside their version range, never half-applied."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from reasonrl.patching import (
    DISABLE_ENV,
    Patch,
    UnsupportedUpstreamVersion,
    apply_patch,
    apply_patches_for,
    patch_status,
)

PLUGGY = version("pluggy")


def make_patch(calls: list, versions: str = ">=1", **kwargs) -> Patch:
    defaults = dict(name="demo", package="pluggy", versions=versions, changes="demo change", upstream_issue="pluggy#0")
    return Patch(**{**defaults, **kwargs}, apply=lambda: calls.append(1))


def test_applied_once_per_process(isolated_plugins):
    calls: list = []
    patch = make_patch(calls)
    assert apply_patch(patch) == "applied"
    assert apply_patch(patch) == "already-applied"
    assert calls == [1] and patch_status("demo") == "applied"


def test_refused_outside_version_range_with_guidance(isolated_plugins):
    calls: list = []
    with pytest.raises(UnsupportedUpstreamVersion) as info:
        apply_patch(make_patch(calls, versions="<0.1"))
    message = str(info.value)
    assert calls == [] and patch_status("demo") == "refused"
    assert "pluggy<0.1" in message and PLUGGY in message and "pluggy#0" in message and DISABLE_ENV in message


def test_alternative_distribution_and_local_version_label(isolated_plugins):
    calls: list = []
    patch = make_patch(calls, package="vllm", distributions=("not-a-real-dist", "torch"), versions=">=2.0")
    assert patch.installed_version() == version("torch")
    assert patch.supports("2.13.0+cpu")
    assert not patch.supports("1.9.0+cpu")


def test_not_installed_and_disabled(isolated_plugins, monkeypatch):
    calls: list = []
    assert apply_patch(make_patch(calls, name="absent", package="no-such-distribution-xyz")) == "not-installed"
    monkeypatch.setenv(DISABLE_ENV, "other, demo")
    assert apply_patch(make_patch(calls)) == "disabled"
    assert calls == []


def test_failed_apply_is_marked_and_reraised(isolated_plugins):
    def explode():
        raise RuntimeError("upstream moved")

    patch = Patch("bad", "pluggy", ">=1", "x", "pluggy#1", explode)
    with pytest.raises(RuntimeError):
        apply_patch(patch)
    assert patch_status("bad") == "failed"


def test_declaration_is_checked():
    from packaging.specifiers import InvalidSpecifier

    with pytest.raises(InvalidSpecifier):
        Patch("x", "pluggy", "not a specifier", "x", "issue", lambda: None)
    with pytest.raises(ValueError, match="upstream issue"):
        Patch("x", "pluggy", ">=1", "x", "", lambda: None)


def test_bridge_applies_its_trigger_and_reports_refusals(isolated_plugins, capsys):
    calls: list = []
    patches = [
        make_patch(calls, name="for-verl", trigger="verl"),
        make_patch(calls, name="for-vllm", trigger="vllm"),
        make_patch(calls, name="too-new", trigger="verl", versions=">=999"),
    ]
    isolated_plugins("patcher", reasonrl_patches=lambda: patches)
    assert apply_patches_for("verl") == {"for-verl": "applied", "too-new": "refused"}
    assert calls == [1] and patch_status("for-vllm") == "pending"
    assert "too-new" in capsys.readouterr().err


def test_cpu_spec_decode_expand_repeats_each_request_value_and_replaces():
    import torch

    from reasonrl.patches.cpu_platform.vllm_cpu_spec_decode_expand import expand_batch_to_tokens

    temperatures = torch.tensor([1.0, 0.7, -1.0])
    expanded = expand_batch_to_tokens(
        temperatures, torch.tensor([1, 3, 4], dtype=torch.int32), 4, replace_from=-1, replace_to=1
    )
    assert expanded.tolist() == [1.0, 0.699999988079071, 0.699999988079071, 1.0] and expanded.dtype == torch.float32
    top_k = expand_batch_to_tokens(torch.tensor([5, 0]), torch.tensor([2, 2]), 2)
    assert top_k.tolist() == [5, 5]


SEPARATE_ASYNC_LOGGER = r"""
import importlib, logging, sys
import verl  # the bridge applies verl-triggered patches (this one waits for the module)
from reasonrl.patches.verl_separate_async_standalone import MODULE, FlushTolerantLogger
module = importlib.import_module(MODULE)
assert isinstance(module.logger, FlushTolerantLogger), type(module.logger)
try:
    module.logger.logger.info("unpatched", flush=True)  # verl's own logger, as verl calls it
    sys.exit("verl's own logger took flush=")
except TypeError as error:
    assert "flush" in str(error), error
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s", force=True)
module.logger.setLevel(logging.INFO)
module.logger.info("standalone replicas only", flush=True)
"""


def test_separate_async_logger_takes_flush_and_still_logs():
    """verl's separate_async with standalone replicas only logs with flush=True (a TypeError on
    logging.Logger): the patched module logger drops the keyword and logs the message. In a fresh
    process: the patch is applied when verl's bridge loads, once per process (in a shared test
    process another test may have imported the module first, or unpatched it)."""
    from reasonrl.testing.fresh_process import python_fresh

    done = python_fresh(SEPARATE_ASYNC_LOGGER)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "standalone replicas only" in done.stdout
