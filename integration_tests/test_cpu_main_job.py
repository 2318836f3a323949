"""The CPU main job end to end: ``reasonrl train recipe=<r> +preset=cpu_tiny`` through verl's
own trainer, a local Ray cluster and vLLM's CPU build as the rollout replica.

Each launch is a real ``reasonrl train`` process (about two minutes to start Ray, the FSDP
trainer and vLLM on two cores, then ~3-7 s per step). What is checked: the configured steps
finish with finite rewards; vLLM generates with the trainer's weights (it starts from
random weights, ``load_format: dummy``, so matching log-probs prove every weight sync);
checkpoints are written and a second launch resumes after the last one (the sampler's state
restored exactly); Ctrl-C leaves no Ray or vLLM process behind; every recipe runs the preset
(mimo, kimi_k15 as its long2short recipe, nemotron here; longcat as the general stage of
``test_domain_parallel.py``).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from reasonrl.callbacks import CALLBACK_TIMING
from reasonrl.smoke.prepare import prepare
from reasonrl.startup_clock import read_parts, until_first_step
from reasonrl.state_io import load_state
from reasonrl.testing.cpu_runs import (
    assert_no_process_left,
    assert_state_restored,
    assert_steps_trained,
    interrupt_and_resume,
    reasonrl_command,
    tail,
    train_args,
    training_steps,
)

#: two launches per test, ~2 min of start-up each on two fast cores and nearly twice that on slow
#: ones beside the other worker's launch: past pytest's default 600 s (CI once cut resumes there)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]


def kimi_k15_techniques(steps: dict, run_dir: Path) -> None:
    step = steps[1]
    assert "actor/kimi/tau" in step  # Kimi's mirror-descent loss ran in the actor workers
    # §2.3.3's length reward: in every group with more than one length, at least its longest
    # response is changed (λ = −0.5); the sampling temperature below makes lengths differ
    assert step["reasonrl/length_varied_groups"] > 0, sorted(step)
    assert step["reasonrl/length_penalty_nonzero"] >= step["reasonrl/length_varied_groups"]
    assert step["reward/math_graded"] > 0  # Math-Verify graded the sums (the reasonrl reward manager)
    assert step["reward/math_timeouts"] == 0.0
    # §2.3.4: the curriculum draws first (the smoke data's sampled pass rates), prioritized later
    assert step["reasonrl/sampling/phase"] == 0.0 and "reasonrl/sampling/curriculum_centre" in step, sorted(step)
    # §2.6.2's repeat detection (+reasonrl/rollout=repeat_detection, tightened below): vLLM stopped
    # looping responses itself and reported why (every response's stop reason reached the trainer);
    # each stopped response lost the penalty (0.5) from its reward
    assert step["reasonrl/rollout/stop_reason_known"] == step["reasonrl/rollout/responses"], sorted(step)
    assert step["reasonrl/rollout/repetition_stops"] > 0
    assert step["reasonrl/rollout/penalised_reward_drop"] == pytest.approx(
        0.5 * step["reasonrl/rollout/repetition_stops"]
    )
    assert_partial_rollout(steps, run_dir)
    # the length curriculum ran on the same requests: its limit logged, no response above it
    assert steps[1]["length_curriculum/limit"] == KIMI_LENGTH_CAP, sorted(steps[1])
    for s in (1, 2):  # (step 2 may run at the next stage, 32, if step 1's lengths reached 0.9 × 8)
        assert steps[s]["response_length/max"] <= steps[s]["length_curriculum/limit"] in (KIMI_LENGTH_CAP, 32)


KIMI_TOKEN_BUDGET = 3
#: the length curriculum's first stage in the Kimi run (the preset's response length, 32, is the last)
KIMI_LENGTH_CAP = 8


def assert_partial_rollout(steps: dict, run_dir: Path) -> None:
    """Kimi §2.6.2: groups with a response that used its whole budget were held (their slots
    refilled) and went out again, continued from their tokens so far: trained responses of two or
    more segments, whose earlier segments were left out of the loss; what was still waiting at a
    checkpoint is in its state and went out first in the next step."""
    held = sum(steps[s]["reasonrl/rollout/partial_held_groups"] for s in (1, 2))
    assert held > 0, sorted(steps[1])
    continued = [s for s in (1, 2) if steps[s]["reasonrl/rollout/partial_continued_responses"] > 0]
    assert continued, [(s, steps[s]["reasonrl/rollout/partial_continued_responses"]) for s in (1, 2)]
    assert 2 in continued, "the groups held at step 1 were trained at step 2"
    for s in continued:
        assert steps[s]["reasonrl/rollout/partial_segments_max"] >= 2
        assert steps[s]["reasonrl/rollout/partial_earlier_tokens_masked"] >= KIMI_TOKEN_BUDGET
    # no response exceeded the budget in one segment: response length <= budget × segments
    assert steps[1]["response_length/max"] <= KIMI_TOKEN_BUDGET * steps[1]["reasonrl/rollout/partial_segments_max"]
    saved = load_state(run_dir / "global_step_1" / "reasonrl" / "rollout.npz")
    waiting = json.loads(saved["store"])["groups"]
    # held groups beyond the refills that took them wait for step 2, in the checkpoint
    assert 0 < len(waiting) == steps[1]["reasonrl/rollout/partial_waiting_groups"]
    assert steps[2]["reasonrl/rollout/partial_carried_groups"] >= min(len(waiting), 16), "sent out first at step 2"
    for group in waiting:  # each waiting group keeps every response, the unfinished ones' tokens so far
        assert len(group["responses"]) == 4 and any(r["unfinished"] for r in group["responses"])
        assert all(sum(map(len, r["segments"])) >= 1 for r in group["responses"])


def nemotron_techniques(steps: dict, run_dir: Path) -> None:
    """nemotron has no group step: verl logs the reward manager's per-sample fields in
    validation, per data source (``val-aux/<source>/<field>/mean@1``)."""
    before = steps[0]
    format_ok = [value for key, value in before.items() if "/format_ok/mean" in key]
    # every validation prompt carries the thinking toggle (the dataset class), every answer got
    # the format reward (-1 would mean "no toggle seen"); the warm start follows it often
    assert format_ok and all(0.0 < value <= 1.0 for value in format_ok), sorted(before)
    assert any("/acc/mean" in key for key in before), sorted(before)  # Math-Verify's verdicts
    # the trainer's unbiased pass@k beside verl's mean@n (one greedy answer here: pass@1 = mean@1)
    pass_at_1 = {key.split("/")[1]: value for key, value in before.items() if key.endswith("/acc/pass@1")}
    mean_at_1 = {key.split("/")[1]: value for key, value in before.items() if key.endswith("/acc/mean@1")}
    assert pass_at_1 and pass_at_1 == pytest.approx(mean_at_1), (pass_at_1, mean_at_1)
    # §5.1: the ≥ 0.75 pass-rate filter dropped the easiest prompts, the Gaussian curriculum drew
    step = steps[1]
    assert step["reasonrl/sampling/pool_filtered_offline"] > 0 and "reasonrl/sampling/curriculum_centre" in step, (
        sorted(step)
    )


#: task reward 0/1, plus the format reward (weight 1) in nemotron, plus Kimi's length reward (|.| <= 0.5)
#: and repetition penalty (0.5)
RECIPE_REWARD_RANGE = {"kimi_k15": (-1.0, 1.5), "nemotron": (0.0, 2.0)}
#: Kimi's CPU run is its long2short RL recipe (kimi_k15_long2short: kimi_k15 with the length penalty
#: from step 1 — the group step of trainer mode reasonrl_sync then reads and writes verl's
#: TransferQueue fields from the first step — and a cut maximum length, the preset's here).
RECIPE_OVERRIDES = {
    # The warm-started model answers a sum with the same number of tokens nearly every time (CI
    # once drew a step where every group had one length): sample hotter so lengths differ.
    "kimi_k15": [
        "trainer.val_before_train=false",
        "actor_rollout_ref.rollout.temperature=2.0",
        # Kimi's repeat detection, tightened so the smoke answers trip it: the tokenizer spells
        # numbers digit by digit, and a doubled token ("11", "00") is a period-1 pattern twice
        "+reasonrl/rollout=[repeat_detection,partial]",
        "reasonrl.rollout.repetition_max_pattern=1",
        "reasonrl.rollout.repetition_min_count=2",
        # Kimi's partial rollout at CPU size: a 3-token budget per iteration, so answers of 4+
        # tokens (most sums with their end token) need a second segment
        f"reasonrl.rollout.token_budget={KIMI_TOKEN_BUDGET}",
        # the length curriculum's cap on the same requests (issue 43: request transforms compose in
        # reasonrl's one agent loop): partial rollout budgets each segment within it
        "+reasonrl/length_curriculum=longcat_code",
        f"reasonrl.length_curriculum.stages=[{KIMI_LENGTH_CAP},32]",
    ],
}


def test_nemotron_in_reasonrl_colocate_async_keeps_its_in_flight_prompts_across_ctrl_c(tmp_path, run_tag):
    """nemotron with its own techniques in reasonrl's asynchronous trainer mode (issue 22: the
    callbacks, prompt source and checkpointed state of reasonrl_sync on verl's colocate_async, one
    mixin): verl's partial rollout trains steps on samples generated one version earlier; Ctrl-C
    after the first checkpoint and a resume: verl re-issues the prompts its checkpoint holds in
    flight, reasonrl restores their dataset rows, so every group's outcome reaches the sampler."""
    run_dir = tmp_path / "run"
    # 4 steps: colocate_async's second step can take ~1 s here (its batch was generated during the
    # first), less than the Ctrl-C takes to stop the run — CI saw the run finish step 2 first, once
    # leaving nothing to resume (with 2 steps) and once checkpointing step 2 without logging its
    # metrics (with 3: the resumed launch then trained only step 3, on fresh samples). In verl's
    # colocate_async a step trains what the step before generated (one version old) or, when that
    # was used up, fresh samples: seen here 0, 1 in a first launch and 1, 0, 1 or 0, … in a resumed
    # one. With 4 steps, some launch logs two steps or more, whether the Ctrl-C stopped the run
    # after step 1 (resumed: 2, 3, 4), 2 (resumed: 3, 4) or 3 (first launch: 1, 2).
    total = 4
    args = train_args(
        "nemotron",
        run_dir,
        f"trainer.total_training_steps={total}",
        "trainer.test_freq=-1",
        "trainer.v1.trainer_mode=reasonrl_colocate_async",
        "trainer.val_before_train=true",  # where verl logs the reward manager's per-sample fields
    )
    saved, first_launch, resumed, resume_log = interrupt_and_resume(
        args, run_dir, tmp_path, run_tag, total, RECIPE_REWARD_RANGE["nemotron"]
    )
    both = {s: {**first_launch.get(s, {}), **resumed.get(s, {})} for s in {*first_launch, *resumed}}
    nemotron_techniques(first_launch, run_dir)
    # verl's colocate_async: some step trains samples generated during the step before (one
    # version old), and none older
    staleness = {
        step: metrics["training/off_policy/trajectory_staleness/max"]
        for step, metrics in training_steps(both).items()
        if step >= 2
    }
    assert 1 in staleness.values() and max(staleness.values()) <= 1, staleness
    assert_state_restored("sampling", run_dir, saved, resume_log)
    rows = load_state(run_dir / f"global_step_{saved}" / "reasonrl" / "prompt_rows.npz")["rows"]
    log = resume_log.read_text()
    reissued = re.search(r"Restored (\d+) training prompt groups from TransferQueue", log)
    assert reissued and int(reissued.group(1)) == len(rows) > 0, tail(resume_log)
    assert f"[reasonrl] prompt_rows: {len(rows)} in-flight prompts' rows restored" in log
    for step in training_steps(both):  # every finished group's outcome reached the sampler, resumed ones too
        assert both[step]["reasonrl/trainer/groups_without_prompt_row"] == 0, (step, both[step])
        assert both[step]["reasonrl/sampling/drawn"] >= 16, "reasonrl's prompt source supplied every batch"


def test_kimi_long2short_rl_with_partial_rollout_loses_no_held_group_across_ctrl_c(tmp_path, run_tag):
    """Kimi §2.4's long2short RL (recipe kimi_k15_long2short, issue 23: the kimi_k15 recipe from a
    given checkpoint, the length penalty from the first step) with Kimi's partial rollout and
    repeat detection (issue 22), interrupted by Ctrl-C after step 1's checkpoint and resumed: the
    groups held at step 1 — every response's tokens so far — come back from the checkpoint exactly
    (state digest) and go out first at step 2, which trains their continued responses."""
    run_dir = tmp_path / "run"
    total = 2
    args = train_args(
        "kimi_k15_long2short",
        run_dir,
        f"actor_rollout_ref.model.path={prepare() / 'model'}",  # the chosen checkpoint (required: ???)
        f"trainer.total_training_steps={total}",
        "trainer.test_freq=-1",
        *RECIPE_OVERRIDES["kimi_k15"],
    )
    saved, first_launch, resumed, resume_log = interrupt_and_resume(
        args, run_dir, tmp_path, run_tag, total, RECIPE_REWARD_RANGE["kimi_k15"]
    )
    assert_steps_trained(first_launch, range(1, saved + 1), tmp_path / "first.log", RECIPE_REWARD_RANGE["kimi_k15"])
    assert_state_restored("rollout", run_dir, saved, resume_log)
    kimi_k15_techniques({**first_launch, **resumed}, run_dir)
    # the recipe's own length penalty from step 1 (kimi_k15_techniques: non-zero at step 1), in
    # each launch's saved config (verl's printed config reaches the log through Ray's log
    # forwarding, which CI once showed without it)
    launches = [OmegaConf.load(path) for path in sorted((run_dir / "configs").glob("*.yaml"))]
    assert len(launches) == 2, "one saved config per launch"
    for launched in launches:
        assert launched.reasonrl.recipe.name == "kimi_k15_long2short", "the long2short recipe ran"
        assert launched.reasonrl.rewards.length_penalty_warmup_steps == 0


def test_ctrl_c_leaves_no_process_and_the_next_launch_resumes(tmp_path, run_tag):
    run_dir = tmp_path / "run"
    total = 6
    args = train_args(
        "mimo",
        run_dir,
        f"trainer.total_training_steps={total}",
        "trainer.test_freq=-1",
        # LongCat §3.4.1's length curriculum at CPU size: a 4-token cap fits a 3-digit sum and its
        # end token, so the trained groups' 90th-percentile length (4) reaches 0.9 × 4 and the
        # limit steps up to 8, where the sums (≤ 4 tokens) stay below 0.9 × 8. (The programs,
        # ~30 tokens, are all right or all cut in a group: DAPO's filter drops them either way.)
        "+reasonrl/length_curriculum=longcat_code",
        f"reasonrl.length_curriculum.stages=[{','.join(map(str, LENGTH_STAGES))}]",
        # MiMo §3.4.1's seamless rollout (the mimo recipe's option): demand-driven launching and
        # FIFO early termination in reasonrl's replay buffer, aborting through verl's abort path
        "+reasonrl/rollout=seamless",
    )
    saved, first_launch, resumed, resume_log = interrupt_and_resume(args, run_dir, tmp_path, run_tag, total)
    assert max(training_steps(first_launch)) >= saved
    # the sampler's state (mimo: easy pool + dynamic sampling) is back exactly as checkpointed
    assert_state_restored("sampling", run_dir, saved, resume_log)
    assert resumed[saved + 1]["reasonrl/sampling/drawn"] >= 16, "the restored sampler drives the next step"
    assert (run_dir / "latest_checkpointed_iteration.txt").read_text().strip() == str(total)
    assert (run_dir / f"global_step_{total}" / "actor").is_dir()
    # per step, both launches' records (the resumed launch validates at the saved step first)
    both = {s: {**first_launch.get(s, {}), **resumed.get(s, {})} for s in {*first_launch, *resumed}}
    assert_length_curriculum(both, resume_log)
    assert_seamless_rollout(first_launch, resumed, run_dir, saved, resume_log)
    assert_mimo_rewards_progress_and_plot(first_launch, resumed, run_dir, resume_log, run_tag)
    assert_costs_and_startup_recorded(resumed, run_dir, resume_log)


#: the parts of a launch's start-up in the order they end (reasonrl.startup_clock's record)
STARTUP_PARTS = [
    "Python, reasonrl imported",
    "config composed and checked",
    "Hydra composed the config",
    "run folder checked, preset's assets",
    "config resolved, inputs checked",
    "verl's bridge checked (import verl)",
    "Ray started",
    "TaskRunner up, TransferQueue started",
    "dataset, tokenizer, worker processes spawned",
    "actor model built, reward workers",
    "vLLM servers",
    "checkpoint engine",
    "checkpoint loaded",
    "reasonrl callbacks built, state restored",
    "agent-loop workers",
    "validation before training",
    "first step begins",
]


def assert_costs_and_startup_recorded(resumed: dict, run_dir: Path, resume_log: Path) -> None:
    """Issue 48: every step logs what each of the run's callbacks and the reward manager's scoring
    cost; each launch's start-up record splits the time to its first step into its parts."""
    for step in training_steps(resumed):
        metrics = resumed[step]
        costs = {k.removeprefix(CALLBACK_TIMING): v for k, v in metrics.items() if k.startswith(CALLBACK_TIMING)}
        assert set(costs) == {"sampling", "group_rewards", "length_curriculum", "rollout"}, sorted(metrics)
        assert all(0.0 <= seconds < metrics["timing_s/step"] for seconds in costs.values()), costs
        assert metrics["reward/scoring_s"] > 0.0
    records = sorted((run_dir / "startup").glob("*.jsonl"))
    assert len(records) == 2, records  # one per launch
    for record in records:
        parts = read_parts(record)
        assert [part.name for part in parts] == STARTUP_PARTS, record.read_text()
        assert 0 < until_first_step(parts) < 600
    assert re.search(r"start-up +\d+ s to the first step", resume_log.read_text()), tail(resume_log)


def assert_seamless_rollout(first_launch: dict, resumed: dict, run_dir: Path, saved: int, resume_log: Path) -> None:
    """Every step ran under the seamless schedule (MiMo's ratios from the replay buffer's token
    counts) and its valid-rate statistics came back from the checkpoint exactly."""
    for steps in (first_launch, resumed):
        for step in training_steps(steps):
            metrics = steps[step]
            tokens = {f: metrics[f"training/stream/{f}_tokens"] for f in ("trained", "untrained", "aborted")}
            assert tokens["trained"] > 0, sorted(metrics)
            waste = 1 - tokens["trained"] / sum(tokens.values())
            assert metrics["reasonrl/rollout/seamless_sample_waste"] == pytest.approx(waste), (step, metrics)
            assert 0.0 <= metrics["reasonrl/rollout/seamless_idle_ratio"] <= 1.0
            assert 0.0 < metrics["reasonrl/rollout/seamless_valid_rate"] < 1.0
    state = assert_state_restored("rollout", run_dir, saved, resume_log)
    assert 0 < int(state["valid_finished"]) <= int(state["finished"])


def assert_mimo_rewards_progress_and_plot(first_launch, resumed, run_dir, resume_log, run_tag) -> None:
    """The main job's own checks, on the launch that ran to the end (one launch serves both:
    CI time): validation before training, the reward counters per step, the progress lines, no
    process left after a finished run, and the plot."""
    assert any(key.startswith("val-core/") for key in first_launch.get(0, {})), "validation before training"
    # the rewards plugin's per-step counters (group step of trainer mode reasonrl_sync): Math-Verify
    # graded the sums every step; the code problems' programs, cut by the length curriculum's
    # 4- and 8-token limits, end in groups DAPO drops (the judge's verdicts inside
    # `reasonrl train`: test_mtp_main_job.py's mimo step)
    for step in training_steps(resumed):
        metrics = resumed[step]
        assert metrics["reward/math_timeouts"] == 0.0 and metrics["reward/judge_errors"] == 0.0, sorted(metrics)
        assert metrics["reward/math_graded"] > 0, sorted(metrics)
        assert metrics["reward/code_calibrated"] == metrics["reward/code_judged"]
    text = resume_log.read_text()
    assert "[reasonrl] step 6/6" in text and "[reasonrl] finished" in text, "progress lines and the summary"
    assert_no_process_left(run_tag, "a finished run leaves no process behind")
    plot = subprocess.run([*reasonrl_command(), "plot", str(run_dir)], capture_output=True, text=True, timeout=120)
    assert plot.returncode == 0, plot.stderr
    assert Path(plot.stdout.strip()).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


LENGTH_STAGES = (4, 8, 32)


def assert_length_curriculum(steps: dict, resume_log: Path) -> None:
    """Each step generated within its limit; the limit followed the rule (next stage when the
    step's 0.9-quantile length reached 0.9 × the limit) across the restart, whose state was restored."""
    trained = sorted(s for s in steps if s >= 1 and "length_curriculum/limit" in steps[s])
    assert trained and trained[0] == 1, sorted(steps)
    assert steps[1]["length_curriculum/limit"] == LENGTH_STAGES[0]
    for s in trained:
        limit = steps[s]["length_curriculum/limit"]
        assert steps[s]["response_length/max"] <= limit, (s, steps[s])
        if s + 1 in steps:
            stage = LENGTH_STAGES.index(int(limit))
            up = steps[s]["length_curriculum/quantile_length"] >= 0.9 * limit and stage + 1 < len(LENGTH_STAGES)
            assert steps[s + 1]["length_curriculum/limit"] == LENGTH_STAGES[stage + up], (s, steps[s], steps[s + 1])
    assert steps[trained[-1]]["length_curriculum/limit"] > LENGTH_STAGES[0], "the curriculum stepped up"
    assert "length_curriculum: state restored" in resume_log.read_text(), tail(resume_log)


def wait_for_manifest(run_dir: Path, process: subprocess.Popen, log: Path, min_step: int) -> int:
    """The first step >= ``min_step`` whose checkpoint is complete: verl's tracker names it and
    reasonrl's manifest, written right after verl's save, is there (a stop before then would
    leave the step without one: checked structurally only)."""
    import time

    from reasonrl.checkpoints import MANIFEST
    from reasonrl.testing.cpu_runs import LAUNCH_TIMEOUT

    tracker = run_dir / "latest_checkpointed_iteration.txt"
    deadline = time.monotonic() + LAUNCH_TIMEOUT
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the run ended before checkpoint {min_step}\n{tail(log)}"
        text = tracker.read_text().strip() if tracker.exists() else ""
        if text and int(text) >= min_step and (run_dir / f"global_step_{text}" / MANIFEST).exists():
            return int(text)
        time.sleep(0.1)
    raise AssertionError(f"no checkpoint {min_step} within {LAUNCH_TIMEOUT} s\n{tail(log)}")


# opt-in (CI's time): its parts are unit tests in tests/test_checkpoints.py (the SIGTERM handler,
# exit 143, corrupt shards named, last_intact); this runs them on a real launch
@pytest.mark.slow
def test_sigterm_stops_as_ctrl_c_and_a_corrupt_checkpoint_is_refused_then_resumed_from_the_last_intact_step(
    tmp_path, run_tag
):
    """Issue 42: SIGTERM (a scheduler's preemption) to a real ``reasonrl train`` mid-run stops it
    as Ctrl-C does ("interrupted", exit 143, nothing left behind); verl's retention
    (max_actor_ckpt_to_keep=2) takes whole step folders along; an actor shard cut short is
    named when the same command is run again (exit 2, before Ray), with the last intact step
    offered; ``+reasonrl_resume=last_intact`` resumes from it (its plugin state restored exactly)
    to the end. Two training launches (~2 min each on 2 cores) and one refused in seconds."""
    import os
    import signal

    from reasonrl.checkpoints import MANIFEST, step_folders, verify_step
    from reasonrl.testing.cpu_runs import assert_no_process_left, launch_metrics, run_to_end, tagged_env

    run_dir = tmp_path / "run"
    total = 4
    args = train_args(
        "nemotron",
        run_dir,
        f"trainer.total_training_steps={total}",
        "trainer.test_freq=-1",
        "trainer.val_before_train=false",
        "trainer.save_freq=1",
        "trainer.max_actor_ckpt_to_keep=2",
    )
    first_log = tmp_path / "first.log"
    with first_log.open("w") as out:
        process = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, env=tagged_env(run_tag), start_new_session=True
        )
        try:
            wait_for_manifest(run_dir, process, first_log, min_step=2)
            os.kill(process.pid, signal.SIGTERM)  # the driver only, as `kill <pid>` or Kubernetes do
            process.wait(timeout=120)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 143, tail(first_log)
    assert "[reasonrl] interrupted by SIGTERM (the same command resumes from the last checkpoint)" in (
        first_log.read_text()
    ), tail(first_log)
    assert_no_process_left(run_tag, "left behind after SIGTERM")
    saved = int((run_dir / "latest_checkpointed_iteration.txt").read_text())
    assert 2 <= saved < total, f"stopped after step {saved} of {total}: too late to test a resume"
    # verl kept two actor checkpoints; the older steps' folders (data.pt, reasonrl/) went with theirs
    assert {step for step in step_folders(run_dir) if step <= saved} == {saved - 1, saved}, tail(first_log)
    for step in (saved - 1, saved):
        assert (run_dir / f"global_step_{step}" / MANIFEST).exists() and verify_step(
            run_dir / f"global_step_{step}"
        ) is None

    shard = next((run_dir / f"global_step_{saved}" / "actor").glob("model_world_size_*_rank_0.pt"))
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    refused = subprocess.run(args, capture_output=True, text=True, env=tagged_env(run_tag), timeout=600)
    assert refused.returncode == 2, refused.stdout[-3000:] + refused.stderr[-3000:]
    assert f"reasonrl train: {shard}: corrupt checkpoint: " in refused.stderr, refused.stderr[-3000:]
    intact = run_dir / f"global_step_{saved - 1}"
    assert f"{intact.name} is intact: rerun with +reasonrl_resume=last_intact" in refused.stderr
    assert "ray init kwargs" not in refused.stdout, "refused before verl started Ray"

    resume_log = tmp_path / "resume.log"
    result = run_to_end([*args, "+reasonrl_resume=last_intact"], run_tag, resume_log)
    assert result.returncode == 0, tail(resume_log)
    log = resume_log.read_text()
    assert f"{shard}: corrupt checkpoint" in log and f"resuming from the last intact step, {intact}" in log
    assert f"{run_dir / f'global_step_{saved}'}: left by an earlier launch; replaced by this save" in log
    assert_state_restored("sampling", run_dir, saved - 1, resume_log)
    first_launch, resumed = launch_metrics(run_dir)  # the refused launch wrote no metrics file
    assert_steps_trained(resumed, range(saved, total + 1), resume_log, RECIPE_REWARD_RANGE["nemotron"])
    assert "[reasonrl] finished" in log and f"last checkpoint   {run_dir / f'global_step_{total}'}\n" in log
    # this launch's retention: its own older saves went whole; the step it resumed from is verl's
    # to keep (verl's retention counts the saves of one launch)
    assert set(step_folders(run_dir)) == {saved - 1, total - 1, total}, sorted(step_folders(run_dir))
    for folder in step_folders(run_dir).values():
        assert verify_step(folder) is None, folder
