"""reasonrl's vLLM plugin changes nothing for users who did not ask (issue 19): in a vLLM process
of this environment without reasonrl's MTP drafting, vLLM's own ``MiMoMTPModel`` stays
registered and the drafter's first-pass patch is not applied (it says why); with drafting
switched on (``REASONRL_MTP_DRAFTER``, set by ``+reasonrl/mtp=mimo`` for the run's workers) the
multi-layer drafter and its patch are in place. Real vLLM plugin loading, fresh processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

PROBE = """
import json
from vllm.plugins import load_general_plugins
load_general_plugins()  # what every vLLM process does: reasonrl's bridge runs here
from vllm import ModelRegistry
from reasonrl.bridges import STATUS
from reasonrl.patching import patch_reason
entry = ModelRegistry.models["MiMoMTPModel"]
status = STATUS["vllm"]
print("RESULT", json.dumps({
    "drafter_module": getattr(entry, "module_name", type(entry).__name__),
    "patches": status.patches,
    "first_pass_reason": patch_reason("vllm-mtp-first-pass"),
    "skipped": [registration.name for _, registration, _ in status.skipped],
    "failed": [registration.name for _, registration in status.failed],
}))
"""


def probe(drafting: str | None) -> dict:
    env = {key: value for key, value in os.environ.items() if key != "REASONRL_MTP_DRAFTER"}
    if drafting is not None:
        env["REASONRL_MTP_DRAFTER"] = drafting
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT ") :])


def test_plain_vllm_keeps_its_own_mimo_drafter():
    result = probe(None)
    assert result["drafter_module"].startswith("vllm.model_executor.models."), result
    assert result["skipped"] == ["MiMoMTPModel"] and result["failed"] == []
    assert result["patches"]["vllm-mtp-first-pass"] == "not-applicable"
    assert "REASONRL_MTP_DRAFTER unset" in result["first_pass_reason"]
    # the CPU-platform fixes still apply on the CPU build
    assert result["patches"]["vllm-cpu-updatable-weights"] == "applied"
    assert result["patches"]["vllm-cpu-spec-decode-expand"] == "applied"


def test_drafting_switched_off_in_the_recipe_keeps_vllms_class():
    assert probe("multi_layer=False")["drafter_module"].startswith("vllm.model_executor.models.")


def test_reasonrl_drafting_registers_the_multi_layer_drafter_and_its_patch():
    result = probe("multi_layer=True")
    assert result["drafter_module"] == "reasonrl.plugins.mtp.vllm_drafter", result
    assert result["patches"]["vllm-mtp-first-pass"] == "applied" and result["skipped"] == []


def test_the_mtp_option_sets_the_switch_for_the_runs_workers():
    from reasonrl.cli.train import compose_config

    config = compose_config(["recipe=mimo", "+preset=cpu_tiny", "+reasonrl/mtp=mimo"])
    assert config.ray_kwargs.ray_init.runtime_env.env_vars.REASONRL_MTP_DRAFTER == "multi_layer=True"
    assert config.ray_kwargs.ray_init.runtime_env.env_vars.VERL_PLATFORM == "cpu"  # merged, not replaced
    off = compose_config(["recipe=mimo", "+preset=cpu_tiny", "+reasonrl/mtp=mimo", "reasonrl.mtp.drafting=false"])
    assert off.ray_kwargs.ray_init.runtime_env.env_vars.REASONRL_MTP_DRAFTER == "multi_layer=False"


def test_worker_env_vars_reach_ray_resolved():
    """verl hands Ray the runtime_env without resolving it: reasonrl train resolves the env vars
    first, or the workers would read the interpolation's literal text."""
    from omegaconf import OmegaConf

    from reasonrl.cli.train import compose_config, export_runtime_env

    config = compose_config(["recipe=mimo", "+preset=cpu_tiny", "+reasonrl/mtp=mimo"])
    before = OmegaConf.to_container(config.ray_kwargs.ray_init.runtime_env, resolve=False)["env_vars"][
        "REASONRL_MTP_DRAFTER"
    ]
    assert before == "multi_layer=${reasonrl.mtp.drafting}"
    saved = dict(os.environ)  # export_runtime_env also sets the driver's environment
    try:
        export_runtime_env(config)
        unresolved = OmegaConf.to_container(config.ray_kwargs.ray_init.runtime_env, resolve=False)["env_vars"]
        assert unresolved["REASONRL_MTP_DRAFTER"] == "multi_layer=True" and unresolved["VERL_PLATFORM"] == "cpu"
        assert os.environ["REASONRL_MTP_DRAFTER"] == "multi_layer=True"
    finally:
        os.environ.clear()
        os.environ.update(saved)
