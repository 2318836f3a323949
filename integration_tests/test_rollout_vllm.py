"""The rollout plugin on vLLM's real CPU build, driven as verl's LLM server drives it
(``AsyncLLM``), on the smoke model (fixture script, fresh processes, ~1 min each):

- vLLM's repeat detection stops each looping greedy generation exactly where the plugin's rule
  (``repetition.first_repetition_stop``) says, and saves the looping tokens;
- a generation cut into token-budget segments and continued from prompt + tokens so far
  (``PartialTrajectory.continuation_request``) equals the uninterrupted one (greedy, same policy);
- verl 0.9.1's abort call works on vLLM 0.32 with patch ``vllm-pause-generation-mode`` and raises
  TypeError without it (why the patch exists).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from reasonrl.testing.fresh_process import run_fresh

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "fixtures" / "vllm_async_rollout.py"


def run_script(*args: str, **env: str) -> dict:
    from reasonrl.smoke.prepare import default_root, ensure

    ensure()
    result = run_fresh(
        [sys.executable, str(SCRIPT), str(default_root() / "model"), *args],
        env={"VERL_PLATFORM": "cpu", **env},
        timeout=400,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_repeat_detection_partial_continuation_and_verls_abort_on_vllm_cpu():
    result = run_script()
    prompts = result["prompts"]
    assert result["repetition_stops"] > prompts // 2, "the smoke model loops under greedy ignore_eos"
    assert result["repetition_agree"] == prompts, "vLLM stops where the rule says, and only there"
    assert result["tokens_stopped"] < result["tokens_free"], "detection saves the looping tokens"
    assert result["partial_equal"] == prompts, "budget segments + continuation == one uninterrupted generation"
    assert result["segments"] > 2
    assert result["abort"] == "abort", "verl's pause_generation(wait_for_inflight_requests=False) aborts"
    assert result["after_resume"] == "length", "the engine generates again after resume_generation"


def test_without_the_patch_verls_abort_call_fails_on_vllm_032():
    result = run_script("abort-only", REASONRL_DISABLE_PATCHES="vllm-pause-generation-mode")
    assert result["abort"].startswith("TypeError") and "wait_for_inflight_requests" in result["abort"]
