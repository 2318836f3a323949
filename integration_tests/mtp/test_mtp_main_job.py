"""One step of the CPU main job with MTP on (issue 9): the smoke model in MiMo's layout with one
MTP layer (``reasonrl mtp attach``: trained on the task's sequences, main model frozen), the mimo
recipe with ``+reasonrl/mtp=mimo`` — verl's FSDP actor loads the registered MiMo class, vLLM
drafts with the MTP layer in rollout, the MTP layer stays frozen and is saved with the run."""

from __future__ import annotations

import math

import pytest
import torch
from safetensors.torch import load_file

from integration_tests.mtp.mimo_checkpoints import VLLM_STATS_LINES, offline_acceptance, online_acceptance
from reasonrl.bridges.verl_actor_loss import LOSS_TIMING
from reasonrl.testing.cpu_runs import assert_steps_trained, launch_metrics, run_to_end, tail, train_args

pytestmark = pytest.mark.integration


def saved_actor(run_dir):
    """The actor's weights verl saved after step 1 (full tensors)."""
    saved = torch.load(
        run_dir / "global_step_1" / "actor" / "model_world_size_1_rank_0.pt", map_location="cpu", weights_only=False
    )
    return {
        name: (tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor) for name, tensor in saved.items()
    }


# opt-in (CI's time): MTP layers drafting in a run's rollout run in CI in test_mtp_megatron.py (trained
# on the Megatron actor, lossless in vLLM), drafting itself in test_mtp_vllm.py
@pytest.mark.slow
def test_one_main_job_step_with_frozen_mtp_layers_drafting_in_rollout(tmp_path, run_tag, mimo_checkpoint):
    model, held_out = mimo_checkpoint
    run_dir, log = tmp_path / "run", tmp_path / "train.log"
    overrides = [
        "+reasonrl/mtp=mimo",
        f"actor_rollout_ref.model.path={model}",
        "trainer.total_training_steps=1",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        *VLLM_STATS_LINES,  # vLLM's stats lines carry the drafts' acceptance
    ]
    result = run_to_end(train_args("mimo", run_dir, *overrides), run_tag, log)
    assert result.returncode == 0, tail(log)
    (steps,) = launch_metrics(run_dir)
    assert_steps_trained(steps, range(1, 2), log)
    # MiMo's own rewards inside `reasonrl train`: Math-Verify on the sums, the sandboxed judge on
    # the code problems, each verdict scored by its test-difficulty calibration (MiMo §3.3.1)
    step = steps[1]
    assert step["reward/math_timeouts"] == 0.0 and step["reward/judge_errors"] == 0.0, sorted(step)
    assert step["reward/math_graded"] > 0 and step["reward/code_judged"] > 0, sorted(step)
    assert step["reward/code_calibrated"] == step["reward/code_judged"]
    text = log.read_text(errors="replace")
    assert "speculative_config=SpeculativeConfig(method='mtp'" in text and "num_spec_tokens=1" in text, tail(log)
    assert "reasonrl MiMoMultiLayerMTP: drafting with 1 MTP layer(s)" in text, tail(log)
    # vLLM starts from random weights (load_format: dummy) and drafting is lossless whatever the
    # drafter's weights: only the acceptance shows that verl's weight sync reached the MTP layer.
    # vLLM's rate (accepted / drafted over the run) is compared with the rate the trained layer and
    # a freshly initialised one get offline on held-out sequences of the same task mix
    # (``acceptance()["sampled"]``: the policy's probability of the greedy draft).
    drafted, online = online_acceptance(text)
    assert drafted > 0, tail(log)
    trained, untrained = offline_acceptance(model, held_out)
    assert abs(online - trained) < abs(online - untrained), (online, trained, untrained)
    before, full = load_file(model / "model.safetensors"), saved_actor(run_dir)
    mtp_names = [name for name in full if ".mtp_layers." in name]
    assert len(mtp_names) == len([name for name in before if ".mtp_layers." in name]) > 0
    assert all(torch.equal(full[name], before[name]) for name in mtp_names)  # frozen (MiMo RL)
    assert any(
        not torch.equal(full[name], before[name]) for name in full if ".mtp_layers." not in name
    )  # the policy trained


def test_eps_schedule_trained_mtp_layers_and_the_longcat_loss_compose_in_one_step(tmp_path, run_tag, mimo_checkpoint):
    """Issue 20: three plugins change the actor's loss in one run — the objectives plugin's
    ε_pos_high schedule (a per-step config value), the mtp plugin's trained MTP layers (an additive
    λ·mean_k L^k) and LongCat's triplet-clipping loss (verl's policy-loss registry). One composed
    loss in the actor workers: each term's metric is logged by the worker, the MTP layer trains.
    It is also the CI's run of reasonrl.mtp.train=true on the FSDP actor (the MTP loss joins
    verl's PPO loss through the trainer callback; the losses reach it in model_output from engine
    mtp_language_model) with drafting running on the synced drafter."""
    model, _ = mimo_checkpoint
    run_dir, log = tmp_path / "run", tmp_path / "train.log"
    schedule = [
        "reasonrl.objective.eps_pos_high=0.25",
        "reasonrl.objective.eps_pos_high_schedule=linear",
        "reasonrl.objective.eps_pos_high_end=0.3",
        "reasonrl.objective.eps_pos_high_steps=4",
    ]
    overrides = [
        "+reasonrl/mtp=mimo",
        "reasonrl.mtp.train=true",
        f"actor_rollout_ref.model.path={model}",
        "trainer.total_training_steps=1",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        *schedule,
    ]
    result = run_to_end(train_args("longcat", run_dir, *overrides), run_tag, log)
    assert result.returncode == 0, tail(log)
    (steps,) = launch_metrics(run_dir)
    assert_steps_trained(steps, range(1, 2), log)
    step = steps[1]
    assert abs(step["actor/eps_pos_high"] - 0.25) < 1e-9  # the trainer's schedule
    assert abs(step["actor/longcat/eps_pos_high"] - 0.25) < 1e-9, "the value LongCat's loss used in the worker"
    assert math.isfinite(step["actor/mtp_1_loss"]) and step["actor/mtp_1_loss"] > 0, tail(log)
    # what each loss term's forward cost the step, through verl's metric aggregation (issue 48)
    for term in ("eps_pos_high_schedule", "mtp_training"):
        assert 0.0 <= step[LOSS_TIMING + term] < step["timing_s/update_actor"], sorted(step)
    assert "reasonrl MiMoMultiLayerMTP: drafting with 1 MTP layer(s)" in log.read_text(errors="replace"), tail(log)
    before, full = load_file(model / "model.safetensors"), saved_actor(run_dir)
    assert not torch.equal(
        full["model.mtp_layers.0.input_proj.weight"], before["model.mtp_layers.0.input_proj.weight"]
    )  # trained
