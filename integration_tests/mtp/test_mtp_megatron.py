"""MiMo MTP trained on verl's Megatron actor (issue 44, part 2).

megatron-core 0.16.1's MTP forward is DeepSeek-V3's (normed h^0, normed chaining) and mbridge 0.15.1's
MiMo map loads the MTP input projection with its halves swapped; the mtp plugin's Megatron adapter
(``verl_megatron.py``: ``megatron_mimo``'s block + the patch ``mbridge-mimo-input-proj``) makes the
Megatron model compute MiMo's function on MiMo's checkpoint. Two checks:

* the checkpoint loaded as verl's CPU Megatron engine loads it gives the Hugging Face MiMo class's
  per-token cross-entropies (main and MTP) to float32 rounding — and without the patch, or without
  the block, the MTP depth's do not (each piece is needed);
* ``reasonrl train recipe=mimo +preset=cpu_tiny_megatron +reasonrl/mtp=mimo reasonrl.mtp.train=true``
  trains the MTP layer on the Megatron actor with megatron-core's loss (λ from reasonrl.mtp.loss_weight),
  vLLM drafts with the synced layer: its sampled tokens' probabilities equal the actor's (speculative
  decoding lossless), its acceptance is the trained layer's, and the saved layer is one step's change
  from the checkpoint in MiMo's layout.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from integration_tests.cpu_platform.test_megatron_cpu import SAME_WEIGHTS, hf_weights, megatron_args
from integration_tests.mtp.mimo_checkpoints import VLLM_STATS_LINES, offline_acceptance, online_acceptance
from reasonrl.plotting import run_metrics
from reasonrl.testing.cpu_runs import run_to_end, tail, training_steps

pytestmark = pytest.mark.integration

AGREEMENT = Path(__file__).with_name("megatron_bridge_agreement.py")
INPUT_PROJ = "model.mtp_layers.0.input_proj.weight"


def agreement(model, *flags: str) -> dict:
    completed = subprocess.run(
        [sys.executable, str(AGREEMENT), str(model), *flags], capture_output=True, text=True, timeout=300
    )
    line = next((line for line in completed.stdout.splitlines() if line.startswith("RESULT ")), None)
    assert line is not None, completed.stderr[-3000:]
    return json.loads(line[len("RESULT ") :])


def test_a_mimo_checkpoint_on_megatron_computes_what_the_hugging_face_class_does(mimo_checkpoint):
    model, _ = mimo_checkpoint
    mimo = agreement(model)
    # measured: main 4.3e-6, depth 1 6.2e-6 (per-token CE up to 11.8)
    assert mimo["main"] < 1e-4 and mimo["depths"][0] < 1e-4, mimo
    # measured: 10.0 without the patch (the halves swapped), 0.21 with megatron's own MTP function
    assert agreement(model, "--without-patch")["depths"][0] > 1.0
    assert agreement(model, "--without-mimo-block")["depths"][0] > 1e-2


def test_mimo_mtp_trains_on_the_megatron_actor_and_drafts_losslessly_in_vllm(tmp_path, run_tag, mimo_checkpoint):
    model, held_out = mimo_checkpoint
    run_dir, log = tmp_path / "run", tmp_path / "launch.log"
    overrides = [
        "+reasonrl/mtp=mimo",
        "reasonrl.mtp.train=true",
        f"actor_rollout_ref.model.path={model}",
        *VLLM_STATS_LINES,  # vLLM's stats lines carry the drafts' acceptance
    ]
    result = run_to_end(megatron_args("mimo", run_dir, *overrides), run_tag, log)
    assert result.returncode == 0, tail(log)
    steps = training_steps(run_metrics(run_dir))
    assert sorted(steps) == [1, 2], f"steps {sorted(steps)}\n{tail(log)}"
    text = log.read_text(errors="replace")
    assert "MiMo's MTP function on megatron-core: 1 MTP layer(s)" in text, tail(log)
    assert "reasonrl MiMoMultiLayerMTP: drafting with 1 MTP layer(s)" in text, tail(log)
    for step, metrics in steps.items():
        # megatron-core's per-depth MTP loss, logged by verl's Megatron engine
        assert math.isfinite(metrics["actor/mtp_losses/mtp_1_loss"]) and metrics["actor/mtp_losses/mtp_1_loss"] > 0
        # rollouts drafted with the MTP layer, sampled as the actor's distribution (vLLM starts from
        # dummy weights: both syncs, before and after the update, reached it)
        assert metrics["training/rollout_probs_diff_max"] < SAME_WEIGHTS, (step, metrics)
    # the drafter holds the trained layer, not a fresh one (the rates vLLM logged over the run)
    drafted, online = online_acceptance(text)
    assert drafted > 0, tail(log)
    trained, untrained = offline_acceptance(model, held_out)
    assert abs(online - trained) < abs(online - untrained), (online, trained, untrained)
    # saved in MiMo's layout: one update's change of the checkpoint's layer (swapped halves would
    # move it by the weights' own size)
    start, saved = hf_weights(model), hf_weights(run_dir / "global_step_2" / "actor" / "model" / "huggingface")
    change = (saved[INPUT_PROJ] - start[INPUT_PROJ]).abs().max().item()
    assert 0 < change < 0.1 * start[INPUT_PROJ].abs().max().item(), change
