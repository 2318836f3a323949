"""verl's Megatron actor and reference model on the CPU (``+preset=cpu_tiny_megatron``).

Each launch is a real ``reasonrl train``: verl's trainer, its Megatron engine (megatron-core 0.16.1's
local layer spec through mbridge, fp32, gloo; ``plugins/cpu_platform/megatron_engine.py``) for the
actor and the reference model, vLLM's CPU build generating. Two steps each, so that the weights
reach vLLM twice: once from the start (vLLM loads random weights, ``load_format: dummy``) and once
after an update. What is checked per launch: the recipe's own metrics (its loss ran in the Megatron
actor), the Megatron engine was the one built with the asked-for parallel layout, and vLLM's
sampling log-probs equal the Megatron actor's to float32 rounding (the weight sync, the local
attention's mask and the padded vocabulary of tensor parallelism are all in that number).

The TP = PP = 1 longcat run also resumes from its step-2 checkpoint for a third step. About 1.5-2
minutes per launch on two fast cores; three of the five launches in CI (longcat with its resume, kimi on
two tensor-parallel ranks), the other two opt-in (`--run-slow`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reasonrl.plotting import run_metrics
from reasonrl.smoke.prepare import prepare as prepare_smoke_model
from reasonrl.testing.cpu_runs import assert_state_restored, run_to_end, tail, train_args, training_steps

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

#: vLLM's and the actor's per-token probabilities of the sampled tokens, at most this far apart:
#: both compute in float32 from the same weights (measured: ≤ 1.1e-6; a padded vocabulary row with
#: probability, or a stale weight, gives 1e-3 and more).
SAME_WEIGHTS = 1e-5


def megatron_args(recipe: str, run_dir, *overrides: str, steps: int = 2) -> list[str]:
    args = train_args(
        recipe,
        run_dir,
        f"trainer.total_training_steps={steps}",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        *overrides,
    )
    return [arg.replace("+preset=cpu_tiny", "+preset=cpu_tiny_megatron") for arg in args]


def two_processes(parallel: str) -> list[str]:
    return [
        "trainer.n_gpus_per_node=2",
        "ray_kwargs.ray_init.num_gpus=2",
        f"actor_rollout_ref.actor.megatron.{parallel}_model_parallel_size=2",
    ]


def run_megatron(recipe: str, tmp_path, run_tag, *overrides: str) -> tuple[dict, str]:
    run_dir, log = tmp_path / "run", tmp_path / "launch.log"
    result = run_to_end(megatron_args(recipe, run_dir, *overrides), run_tag, log)
    assert result.returncode == 0, tail(log)
    steps = training_steps(run_metrics(run_dir))
    assert sorted(steps) == [1, 2], f"steps {sorted(steps)}\n{tail(log)}"
    for step, metrics in steps.items():
        assert metrics["training/rollout_probs_diff_max"] < SAME_WEIGHTS, (
            step,
            metrics["training/rollout_probs_diff_max"],
        )
    assert steps[1]["actor/ppo_kl"] != 0.0 or steps[2]["actor/ppo_kl"] != 0.0, "the policy moved"
    return steps, log.read_text(errors="replace")


def megatron_ranks(log: str) -> set[tuple[int, int]]:
    """(tensor, pipeline) ranks of the Megatron models built (megatron prints one line per model)."""
    found = re.findall(r"model parallel rank \((\d+), (\d+)\): \d+", log)
    return {(int(tp), int(pp)) for tp, pp in found}


def longcat_ran(steps: dict) -> None:
    for metrics in steps.values():
        # §3.2.1's triplet clipping and truncated IS, computed in the Megatron actor's loss
        assert {"actor/longcat/clipfrac_dual_floor", "actor/longcat/tis_mean"} <= set(metrics), sorted(metrics)


def kimi_ran(steps: dict, log: str) -> None:
    for metrics in steps.values():
        assert metrics["actor/kimi/tau"] == 0.1, sorted(metrics)  # §2.3.2's mirror-descent loss
    # §2.3.2's optimizer reset, added to megatron-core's optimizer (16 prompts / 8 per update)
    assert "Kimi's optimizer reset on megatron-core's adam: every 2 updates" in log, log[-3000:]


def hf_weights(folder) -> dict:
    from safetensors.torch import load_file

    return {name: tensor for path in sorted(folder.glob("*.safetensors")) for name, tensor in load_file(path).items()}


def largest_change(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[name] - b[name]).abs().max().item() for name in a)


def test_longcat_on_the_megatron_actor_checkpoints_and_resumes(tmp_path, run_tag):
    # the sampler's settings are part of its checkpointed state: the same in both launches
    same_pace = "+reasonrl.sampling.pace_steps=3"  # (else trainer.total_training_steps, 2 then 3)
    steps, log = run_megatron("longcat", tmp_path, run_tag, same_pace)
    longcat_ran(steps)
    assert megatron_ranks(log) == {(0, 0)}
    # a third step from the step-2 checkpoint: megatron's optimizer state (dist-checkpointing on the
    # host), the weights (Hugging Face form) and the plugins' states back
    run_dir, resume_log = tmp_path / "run", tmp_path / "resume.log"
    result = run_to_end(megatron_args("longcat", run_dir, same_pace, steps=3), run_tag, resume_log)
    assert result.returncode == 0, tail(resume_log)
    assert f"resuming from {run_dir / 'global_step_2'}" in resume_log.read_text()
    assert sorted(training_steps(run_metrics(run_dir))) == [1, 2, 3]
    assert_state_restored("sampling", run_dir, 2, resume_log)
    start = hf_weights(Path(prepare_smoke_model()) / "model")
    second, third = (hf_weights(run_dir / f"global_step_{s}" / "actor" / "model" / "huggingface") for s in (2, 3))
    # step 3 moved on from step 2's weights (one step's change), not from the start (three steps')
    assert largest_change(third, second) < 0.6 * largest_change(third, start), (
        largest_change(third, second),
        largest_change(third, start),
    )


@pytest.mark.slow  # opt-in (CI's time): kimi on Megatron runs in CI on two tensor-parallel ranks
def test_kimi_on_the_megatron_actor(tmp_path, run_tag):
    steps, log = run_megatron("kimi_k15", tmp_path, run_tag)
    kimi_ran(steps, log)
    assert megatron_ranks(log) == {(0, 0)}


@pytest.mark.slow  # opt-in (CI's time): two Megatron processes run in CI as tensor-parallel ranks
def test_longcat_on_two_pipeline_stages(tmp_path, run_tag):
    steps, log = run_megatron("longcat", tmp_path, run_tag, *two_processes("pipeline"))
    longcat_ran(steps)
    assert megatron_ranks(log) == {(0, 0), (0, 1)}


def test_kimi_on_two_tensor_parallel_ranks(tmp_path, run_tag):
    # the smoke vocabulary (53) is padded to 54 to split it; the padding row gets no probability
    steps, log = run_megatron("kimi_k15", tmp_path, run_tag, *two_processes("tensor"))
    kimi_ran(steps, log)
    assert megatron_ranks(log) == {(0, 0), (1, 0)}
