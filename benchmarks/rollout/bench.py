"""``reasonrl bench rollout``: the rollout schedulers compared, in three parts (one command).

- **Real generation** (``bench_real.py``, its own process): vLLM's CPU build on the smoke model,
  naive dynamic sampling, verl's synchronous DAPO, seamless rollout, partial rollout
  (iterations of at most ``token_budget`` decode steps, continuation from the tokens so far),
  verl's colocate_async (the same without a budget) and ``+reasonrl/rollout=staleness`` on one
  engine (``staleness_colocated``: seamless, its finished valid surplus reused within the bound)
  on the same long-tail trace (rollout phase only), and repeat detection's cost and saving. Sample
  waste as the simulator counts it (tokens still carried at the end left out), with and without
  dynamic sampling's dropped groups, beside the simulator's own figure. The engine's
  decode-step time and the cost of admitting requests are calibrated against the number of active
  requests before each policy and after the last; the simulator, given the two calibrations that
  bracket a policy's run, predicts it: its error is printed.
- **Two engines** (``bench_engines.py``, its own process): two vLLM-CPU engines of one core each, a
  trainer stand-in (a fixed time per step and per trained token, and a weight sync), the same
  trace: naive on a static split, seamless and DORA (``+reasonrl/rollout=dora``'s bound and update
  group, its trainer on a device of its own); time per trained token and waste, and the simulator's
  prediction of each run (two engines, the calibrations bracketing it) beside them.
- **Simulator** (``simulator.py``) at MiMo's scale (256 single-GPU engines of 64 slots, 32K max
  tokens, 512 groups × 16 per batch): naive, verl's synchronous DAPO, seamless, partial rollout,
  colocate_async, staleness (DORA, devices apart) and staleness_colocated; a validation pass (naive
  vs seamless); and how the two ratios the issue targets move with the assumptions nobody measured
  here (naive's reward parallelism, slots per engine).

Numbers only, no thresholds; ``--json OUT`` writes them, ``--plot PNG`` a request timeline (and the
two-engine figures beside it); ``--only PART`` runs some parts (``simulated``, ``one-engine``,
``two-engines``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from benchmarks.rollout.bench_engines import ENGINE_POLICIES
from benchmarks.rollout.bench_real import REAL_POLICIES
from benchmarks.rollout.simulator import EngineModel, simulate, validation_time
from benchmarks.rollout.trace import long_tail_trace
from reasonrl.contracts import CliCommand
from reasonrl.plugins.rollout.seamless import sample_waste

#: MiMo-scale simulation (trace: log-normal, p99 ≈ 9× the median, wrong answers 1.3× longer, 3 %
#: looping to the limit, pass rate 0.41 from Beta(0.41, 0.59): see trace.py).
MIMO_SCALE = {"n_prompts": 8192, "group_size": 16, "median_tokens": 4096, "max_tokens": 32768, "seed": 0}
MIMO_BATCH = 512  # prompts per step (MiMo RL: batch 512, 16 rollouts each)
#: MiMo-7B RL on 256 GPUs, one engine per GPU (a 7B needs no tensor parallelism). Assumptions, not
#: measurements: 64 sequences per engine (KV cache of an 80 GB GPU at 32K context); a decode step
#: of 12 ms (reading 15 GB of weights, plus overheads) + 0.2 ms per active sequence (its KV cache at
#: a few K tokens); training ~4K tokens/s per GPU (1e-6 s per token over 256 GPUs) + 20 s, weight
#: sync 5 s; a group's reward 2 s; naive scores a round 256 samples at a time.
MIMO_ENGINE = EngineModel(
    slots=256 * 64,
    engines=256,
    step_a=0.012,
    step_b=2e-4,
    reward_latency=2.0,
    reward_workers=256,
    train_c=20.0,
    train_d=1e-6,
    sync_time=5.0,
)
#: The assumptions the sensitivity table varies: naive's reward workers (None: a round scored in
#: one reward latency) and sequences per engine.
SENSITIVITY = {"reward_workers": (None, 256, 64), "slots_per_engine": (32, 64)}
#: The real part: 4 requests per group, lengths that fit the smoke model's 64 positions.
REAL_SPEC = {
    "slots": 32,
    "batch_groups": 4,
    "steps": 32,  # 128 trained groups per policy: a length ratio's standard error ~4 % (16 groups: ~10 %)
    "reward_latency": 0.05,
    # partial rollout: tokens per request per iteration (the trace's ~p80; MiMo scale: 8K of 32K)
    "token_budget": 10,
    # staleness_colocated: +reasonrl/rollout=staleness's values (hydra_configs/reasonrl/rollout/staleness.yaml)
    "staleness": 1,
    "reuse_ratio": 0.5,
    "trace": {"n_prompts": 256, "group_size": 4, "median_tokens": 6, "p99_ratio": 7.0, "max_tokens": 40, "seed": 1},
}

#: The two-engine part: two vLLM-CPU engines of 16 slots, one core each; the same trace; a trainer
#: stand-in of 50 ms + 0.5 ms per trained token (about the engines' generation time for a batch, so
#: that overlapping them matters) and a 30 ms weight sync; DORA with +reasonrl/rollout=dora's values.
ENGINE_SPEC = {
    "slots": 32,
    "batch_groups": 4,
    "steps": 32,
    "reward_latency": 0.05,
    "train_c": 0.05,
    "train_d": 5e-4,
    "sync_time": 0.03,
    # +reasonrl/rollout=dora (hydra_configs/reasonrl/rollout/dora.yaml)
    "staleness": 2,
    "update_group": 1,
    "trace": REAL_SPEC["trace"],
}
#: the simulator's policy for each two-engine policy
ENGINE_SIMULATED = {"naive_split": "naive", "seamless": "seamless", "dora": "dora"}


def headline_ratios(per_token: dict, validation: dict) -> dict:
    """seamless/naive and staleness/naive per trained token, and the validation pass's ratio."""
    return {
        "seamless_vs_naive": per_token["naive"] / per_token["seamless"],
        "staleness_vs_naive": per_token["naive"] / per_token["staleness"],
        "validation_seamless_vs_naive": validation["naive"] / validation["seamless"],
    }


def simulated(steps: int = 6) -> dict:
    trace = long_tail_trace(**MIMO_SCALE)
    engine, run = MIMO_ENGINE, dict(batch_groups=MIMO_BATCH, record_timeline=False)
    staleness_engine = replace(engine, gen_share=0.75)
    runs = {
        "naive": simulate("naive", trace, engine, steps, **run),
        "verl_sync": simulate("verl_sync", trace, engine, steps, **run),
        "seamless": simulate("seamless", trace, engine, steps, **run),
        "partial": simulate("partial", trace, engine, 3 * steps, token_budget=8192, **run),
        "colocate_async": simulate("colocate_async", trace, engine, steps, **run),
        "staleness": simulate("staleness", trace, staleness_engine, steps, staleness=1, **run),
        # +reasonrl/rollout=staleness as it runs on one colocated engine (its values: bound 1, reuse 0.5)
        "staleness_colocated": simulate(
            "staleness_colocated", trace, engine, steps, staleness=1, reuse_ratio=0.5, **run
        ),
    }
    summaries = {name: result.summary(skip=1) for name, result in runs.items()}
    per_token = {name: s["time_per_trained_token_s"] for name, s in summaries.items()}
    validation = {p: validation_time(p, trace, engine, MIMO_BATCH) for p in ("naive", "seamless")}
    main_row = headline_ratios(per_token, validation)
    return {
        "engine": asdict(engine),
        "batch_groups": MIMO_BATCH,
        "summaries": summaries,
        **main_row,
        "seamless_vs_verl_sync": per_token["verl_sync"] / per_token["seamless"],
        "partial_vs_verl_sync": per_token["verl_sync"] / per_token["partial"],
        "staleness_colocated_vs_seamless": per_token["seamless"] / per_token["staleness_colocated"],
        "validation_s": validation,
        "sensitivity": sensitivity(trace, steps, main_row),
    }


def sensitivity(trace, steps: int, main_row: dict) -> list[dict]:
    """seamless/naive, staleness/naive and the validation ratio under other assumptions (the
    bench's own assumptions give ``main_row``)."""
    rows = []
    for slots_per_engine in SENSITIVITY["slots_per_engine"]:
        for workers in SENSITIVITY["reward_workers"]:
            engine = replace(MIMO_ENGINE, slots=MIMO_ENGINE.engines * slots_per_engine, reward_workers=workers)
            if engine == MIMO_ENGINE:
                rows.append({"slots_per_engine": slots_per_engine, "reward_workers": workers, **main_row})
                continue
            run = dict(batch_groups=MIMO_BATCH, record_timeline=False)
            per_token = {
                name: simulate(name, trace, model, steps, **run, **knobs).summary(skip=1)["time_per_trained_token_s"]
                for name, model, knobs in (
                    ("naive", engine, {}),
                    ("seamless", engine, {}),
                    ("staleness", replace(engine, gen_share=0.75), {"staleness": 1}),
                )
            }
            validation = {p: validation_time(p, trace, engine, MIMO_BATCH) for p in ("naive", "seamless")}
            rows.append(
                {
                    "slots_per_engine": slots_per_engine,
                    "reward_workers": workers,
                    **headline_ratios(per_token, validation),
                }
            )
    return rows


def bracketed(before: dict, after: dict) -> dict:
    """The engine's costs during a run: the mean of the calibrations made just before and just after it."""
    keys = ("step_a", "step_b", "admit_a", "admit_b")
    return {key: (before[key] + after[key]) / 2 for key in keys}


def measured_in_fresh_process(module: str, spec: dict) -> tuple[dict, dict]:
    """Run a real-generation module (``python -m module SPEC_JSON``, the smoke model added to the
    spec) in a fresh process: the spec it ran with and the JSON line it printed."""
    from benchmarks import ROOT
    from reasonrl.smoke.prepare import default_root, ensure
    from reasonrl.testing.fresh_process import run_fresh

    ensure()
    spec = {**spec, "model": str(default_root() / "model")}
    done = run_fresh(
        [sys.executable, "-m", module, json.dumps(spec)], pythonpath=[ROOT], env={"VERL_PLATFORM": "cpu"}, timeout=1800
    )
    if done.returncode != 0:
        raise RuntimeError(f"{module} failed:\n{done.stderr[-3000:]}")
    return spec, json.loads(done.stdout.strip().splitlines()[-1])


def real(spec: dict) -> dict:
    """Run ``bench_real.py`` in a fresh process; then the simulator's prediction of the same runs."""
    spec, measured = measured_in_fresh_process("benchmarks.rollout.bench_real", spec)
    calibrations = measured["calibrations"]  # before each policy, and after the last
    trace = long_tail_trace(**spec["trace"])
    out = {"calibration": bracketed(calibrations[0], calibrations[-1]), "calibrations": calibrations, "spec": spec}
    for index, policy in enumerate(REAL_POLICIES):
        calibration = bracketed(calibrations[index], calibrations[index + 1])
        engine = EngineModel(  # calibration: step_a, step_b, admit_a, admit_b
            slots=spec["slots"],
            reward_latency=spec["reward_latency"],
            train_c=0.0,
            train_d=0.0,
            sync_time=0.0,
            **calibration,
        )
        steps = measured[policy]["steps"]
        wall = sum(s["wall_s"] for s in steps)
        trained = sum(s["trained_tokens"] for s in steps)
        knobs = {
            "partial": {"token_budget": spec["token_budget"]},
            "staleness_colocated": {"staleness": spec["staleness"], "reuse_ratio": spec["reuse_ratio"]},
        }.get(policy, {})
        predicted = simulate(
            policy, trace, engine, len(steps), batch_groups=spec["batch_groups"], record_timeline=False, **knobs
        )
        predicted_wall = sum(s.wall_s for s in predicted.steps)
        prediction = predicted.summary(skip=0)
        decided = measured[policy]["generated_tokens"] - measured[policy]["pending_tokens"]
        walls = [s["wall_s"] for s in steps]
        out[policy] = {
            "step_wall_s": [s["wall_s"] for s in steps],
            "trained_tokens": trained,
            "generated_tokens": measured[policy]["generated_tokens"],
            "time_per_trained_token_s": wall / max(trained, 1),
            # as the simulator counts it: pending tokens (still carried at the end) left out; "valid":
            # also the finished groups dynamic sampling drops (aborted and surplus samples still count)
            "sample_waste": sample_waste(decided, trained),
            "sample_waste_valid": sample_waste(decided - measured[policy]["dropped_tokens"], trained),
            "simulated_sample_waste": prediction["sample_waste"],
            "simulated_sample_waste_valid": prediction["sample_waste_valid"],
            "simulated_wall_s": predicted_wall,
            "simulator_error": predicted_wall / wall - 1.0,
            "step_p99_over_median": float(np.percentile(walls, 99) / np.median(walls)),
            "calibration": calibration,
            "length_bias": measured[policy]["length_bias"],
            "length_bias_valid": measured[policy]["length_bias_valid"],
            "length_bias_vs_launched_valid": measured[policy]["length_bias_vs_launched_valid"],
            "reward_bias": measured[policy]["reward_bias"],
            "reward_bias_valid": measured[policy]["reward_bias_valid"],
        }
    staleness = out["staleness_colocated"]
    staleness["reused_groups"] = sum(step.get("reused_groups", 0) for step in measured["staleness_colocated"]["steps"])
    staleness["trained_groups"] = spec["batch_groups"] * len(measured["staleness_colocated"]["steps"])
    iterations = [t for step in measured["partial"]["steps"] for t in step["iterations_s"]]
    out["partial"]["iterations"] = len(iterations)
    out["partial"]["iteration_p99_over_median"] = float(np.percentile(iterations, 99) / np.median(iterations))
    per_token = {policy: out[policy]["time_per_trained_token_s"] for policy in REAL_POLICIES}
    out["seamless_vs_naive"] = per_token["naive"] / per_token["seamless"]
    out["seamless_vs_verl_sync"] = per_token["verl_sync"] / per_token["seamless"]
    out["partial_vs_verl_sync"] = per_token["verl_sync"] / per_token["partial"]
    out["colocate_async_vs_verl_sync"] = per_token["verl_sync"] / per_token["colocate_async"]
    out["partial_vs_colocate_async"] = per_token["colocate_async"] / per_token["partial"]
    out["staleness_colocated_vs_naive"] = per_token["naive"] / per_token["staleness_colocated"]
    out["staleness_colocated_vs_seamless"] = per_token["seamless"] / per_token["staleness_colocated"]
    out["sample_waste"] = {policy: out[policy]["sample_waste"] for policy in REAL_POLICIES}
    out["sample_waste_valid"] = {policy: out[policy]["sample_waste_valid"] for policy in REAL_POLICIES}
    out["length_bias"] = {"seamless": out["seamless"]["length_bias"], "partial": out["partial"]["length_bias"]}
    out["repetition"] = measured["repetition"]
    return out


def two_engines(spec: dict) -> dict:
    """Run ``bench_engines.py`` in a fresh process; then the simulator's prediction of the same runs
    (two engines, the calibrations bracketing each run, the same trainer stand-in)."""
    spec, measured = measured_in_fresh_process("benchmarks.rollout.bench_engines", spec)
    calibrations = measured["calibrations"]
    trace = long_tail_trace(**spec["trace"])
    out: dict = {"calibrations": calibrations, "cores": measured["cores"], "spec": spec}
    for index, policy in enumerate(ENGINE_POLICIES):
        calibration = bracketed(calibrations[index], calibrations[index + 1])
        run = measured[policy]
        steps = run["steps"]
        # the trainer stand-in's and the syncs' durations as they ran (sleeps end late on the loaded
        # client loop; DORA's update adds the abort and the cache reset): costs, like the calibration
        train_c = float(np.mean([st["train_s"] - spec["train_d"] * st["trained_tokens"] for st in steps]))
        sync = float(np.mean([st["sync_s"] for st in steps if st["sync_s"] is not None]))
        engine = EngineModel(
            slots=spec["slots"],
            engines=2,
            reward_latency=spec["reward_latency"],
            train_c=train_c,
            train_d=spec["train_d"],
            sync_time=sync,
            **calibration,
        )
        wall, trained = sum(s["wall_s"] for s in steps), sum(s["trained_tokens"] for s in steps)
        knobs = {"staleness": spec["staleness"], "update_group": spec["update_group"]} if policy == "dora" else {}
        predicted = simulate(
            ENGINE_SIMULATED[policy],
            trace,
            engine,
            len(steps),
            batch_groups=spec["batch_groups"],
            record_timeline=False,
            **knobs,
        )
        prediction = predicted.summary(skip=0)
        predicted_wall = sum(s.wall_s for s in predicted.steps)
        decided = run["generated_tokens"] - run["pending_tokens"]
        out[policy] = {
            "step_wall_s": [s["wall_s"] for s in steps],
            "wall_s": wall,
            "trained_tokens": trained,
            "generated_tokens": run["generated_tokens"],
            "time_per_trained_token_s": wall / max(trained, 1),
            "sample_waste": sample_waste(decided, trained),
            "sample_waste_valid": sample_waste(decided - run["dropped_tokens"], trained),
            "simulated_wall_s": predicted_wall,
            "simulated_time_per_trained_token_s": prediction["time_per_trained_token_s"],
            "simulated_sample_waste": prediction["sample_waste"],
            "simulated_sample_waste_valid": prediction["sample_waste_valid"],
            "simulator_error": predicted_wall / wall - 1.0,
            "calibration": calibration,
            "train_c_as_run": train_c,
            "sync_as_run": sync,
        }
        if policy == "dora":
            out[policy]["stale_tokens"] = run["stale_tokens"]
            out[policy]["continued"] = run["continued"]
            out[policy]["batch_versions"] = [len(s["versions"]) for s in steps]
            out[policy]["batch_lag_max"] = max(s["lag"] for s in steps)
            out[policy]["engine_versions"] = [s["engine_versions"] for s in steps]
            out[policy]["simulated_staleness_hist"] = prediction["staleness_hist"]
    per_token = {policy: out[policy]["time_per_trained_token_s"] for policy in ENGINE_POLICIES}
    out["seamless_vs_naive_split"] = per_token["naive_split"] / per_token["seamless"]
    out["dora_vs_naive_split"] = per_token["naive_split"] / per_token["dora"]
    out["dora_vs_seamless"] = per_token["seamless"] / per_token["dora"]
    return out


def print_two_engines(result: dict) -> None:
    spec = result["spec"]
    print(
        f"two engines (vLLM CPU, one core each: cores {result['cores']}; trainer stand-in {spec['train_c'] * 1e3:.0f} ms + "
        f"{spec['train_d'] * 1e3:.1f} ms/token, sync {spec['sync_time'] * 1e3:.0f} ms; DORA: staleness "
        f"{spec['staleness']}, {spec['update_group']} engine per update, its trainer on a device of its own):",
        flush=True,
    )
    for index, c in enumerate(result["calibrations"]):
        when = "after the last policy" if index == len(ENGINE_POLICIES) else f"before {ENGINE_POLICIES[index]}"
        print(
            f"  calibrated {when} (both engines at once, their mean): decode step = {c['step_a'] * 1e3:.2f} ms + "
            f"{c['step_b'] * 1e3:.3f} ms × active; admitting k = {c['admit_a'] * 1e3:.2f} ms + "
            f"{c['admit_b'] * 1e3:.3f} ms × k",
            flush=True,
        )
    for policy in ENGINE_POLICIES:
        r = result[policy]
        print(
            f"  {policy:<12} per trained token {r['time_per_trained_token_s'] * 1e3:6.2f} ms (simulated "
            f"{r['simulated_time_per_trained_token_s'] * 1e3:6.2f})  waste {r['sample_waste']:5.1%} (valid groups "
            f"{r['sample_waste_valid']:5.1%}; simulated {r['simulated_sample_waste']:5.1%} / "
            f"{r['simulated_sample_waste_valid']:5.1%})  simulator error {r['simulator_error']:+.1%} (trainer "
            f"{r['train_c_as_run'] * 1e3:.0f} ms + per token, sync {r['sync_as_run'] * 1e3:.0f} ms as run)",
            flush=True,
        )
    dora = result["dora"]
    print(
        f"  dora: batches holding more than one version {sum(n > 1 for n in dora['batch_versions'])} of "
        f"{len(dora['batch_versions'])}, largest lag {dora['batch_lag_max']} (bound {spec['staleness']}), "
        f"stale tokens dropped {dora['stale_tokens']}, responses continued across an update {dora['continued']}",
        flush=True,
    )
    for key in ("seamless_vs_naive_split", "dora_vs_naive_split", "dora_vs_seamless"):
        print(f"  {key}: {result[key]:.2f}x", flush=True)


def two_engines_plot(result: dict, path: Path) -> Path:
    """The two-engine run: time per trained token and waste per policy, measured beside simulated."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policies = list(ENGINE_POLICIES)
    x = np.arange(len(policies))
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for offset, (label, key) in zip((-0.2, 0.2), (("measured", ""), ("simulated", "simulated_"))):
        per_token = [result[p][f"{key}time_per_trained_token_s"] * 1e3 for p in policies]
        waste = [result[p][f"{key}sample_waste_valid"] * 100 for p in policies]
        left.bar(x + offset, per_token, 0.4, label=label)
        right.bar(x + offset, waste, 0.4, label=label)
    for axis, title in ((left, "time per trained token (ms)"), (right, "waste, valid groups (%)")):
        axis.set_xticks(x, policies)
        axis.set_title(title)
        axis.legend()
    figure.suptitle("two vLLM-CPU engines, one core each (reasonrl bench rollout)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return path


def timeline_plot(path: Path) -> Path:
    """Requests on a time axis, coloured by policy version, for seamless and staleness runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trace = long_tail_trace(n_prompts=512, group_size=4, median_tokens=400, max_tokens=4096, seed=2)
    engine = EngineModel(
        slots=48, step_a=0.02, step_b=2e-4, reward_latency=0.5, train_c=2.0, train_d=0.0, sync_time=0.5
    )
    runs = {
        "seamless": simulate("seamless", trace, engine, 4, batch_groups=6),
        "staleness (s=1)": simulate(
            "staleness", trace, replace(engine, gen_share=0.75), 4, batch_groups=6, staleness=1
        ),
    }
    figure, axes = plt.subplots(len(runs), 1, figsize=(10, 7), sharex=True)
    colours = plt.get_cmap("tab10")
    for axis, (label, result) in zip(axes, runs.items()):
        for row, event in enumerate(sorted(result.timeline, key=lambda e: (e.start, e.request))):
            style = "-" if event.outcome in ("finished", "budget") else ":"
            axis.plot([event.start, event.end], [row, row], style, color=colours(event.version % 10), linewidth=1.2)
        axis.set_title(f"{label}: one line per request segment, colour = policy version, dotted = aborted")
        axis.set_ylabel("request")
    axes[-1].set_xlabel("simulated seconds")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return path


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", type=Path, help="write the numbers here")
    parser.add_argument(
        "--plot", type=Path, help="write a request timeline (PNG) here, and the two-engine figures beside it"
    )
    parser.add_argument("--no-real", action="store_true", help="simulator only (no vLLM run)")
    parser.add_argument(
        "--only",
        choices=("simulated", "one-engine", "two-engines"),
        action="append",
        help="run only these parts (repeatable; default: all, or the simulator alone with --no-real)",
    )


def _simulated_part(result: dict) -> None:
    print(
        f"simulated at MiMo's scale ({MIMO_ENGINE.engines} engines × {MIMO_ENGINE.slots // MIMO_ENGINE.engines} "
        f"slots, 32K max tokens, {MIMO_BATCH} groups × 16 per batch):",
        flush=True,
    )
    sim = result["simulated"] = simulated()
    for name, s in sim["summaries"].items():
        print(
            f"  {name:<19} step median {s['step_wall_median_s']:7.1f} s  p90 {s['step_wall_p90_s']:7.1f} s  "
            f"per trained token {s['time_per_trained_token_s'] * 1e6:6.2f} us  waste {s['sample_waste']:5.1%} "
            f"(valid groups {s['sample_waste_valid']:5.1%})  idle {s['idle_ratio']:5.1%} (slots "
            f"{s['slot_idle_ratio']:5.1%})  length bias {s['length_bias']:.3f}",
            flush=True,
        )
    for key in (
        "seamless_vs_naive",
        "seamless_vs_verl_sync",
        "partial_vs_verl_sync",
        "staleness_vs_naive",
        "staleness_colocated_vs_seamless",
    ):
        print(f"  {key}: {sim[key]:.2f}x", flush=True)
    print(
        f"  validation pass ({MIMO_BATCH} groups): naive {sim['validation_s']['naive']:.0f} s, seamless "
        f"{sim['validation_s']['seamless']:.0f} s: {sim['validation_seamless_vs_naive']:.2f}x",
        flush=True,
    )
    print("  sensitivity (slots per engine, naive's reward workers: seamless / staleness / validation):", flush=True)
    for row in sim["sensitivity"]:
        workers = row["reward_workers"] or "all"
        print(
            f"    {row['slots_per_engine']:>3} slots, {workers!s:>4} workers: {row['seamless_vs_naive']:.2f}x / "
            f"{row['staleness_vs_naive']:.2f}x / {row['validation_seamless_vs_naive']:.2f}x",
            flush=True,
        )


def _one_engine_part(result: dict) -> None:
    print("real generation (vLLM CPU, smoke model; rollout phase):", flush=True)
    result["real"] = real(REAL_SPEC)
    for index, c in enumerate(result["real"]["calibrations"]):
        when = "after the last policy" if index == len(REAL_POLICIES) else f"before {REAL_POLICIES[index]}"
        print(
            f"  calibrated {when}: decode step = {c['step_a'] * 1e3:.2f} ms + {c['step_b'] * 1e3:.3f} ms × "
            f"active; admitting k requests at once = {c['admit_a'] * 1e3:.2f} ms + {c['admit_b'] * 1e3:.3f} ms × k",
            flush=True,
        )
    for policy in REAL_POLICIES:
        r = result["real"][policy]
        error = f"{r['simulator_error']:+.1%}"
        print(
            f"  {policy:<19} per trained token {r['time_per_trained_token_s'] * 1e3:7.2f} ms  waste "
            f"{r['sample_waste']:5.1%} (valid groups {r['sample_waste_valid']:5.1%}; simulated "
            f"{r['simulated_sample_waste']:5.1%} / {r['simulated_sample_waste_valid']:5.1%})  length bias "
            f"{r['length_bias']:.3f} (finished valid groups "
            f"{r['length_bias_valid']:.3f}, launched valid groups {r['length_bias_vs_launched_valid']:.3f})  "
            f"reward bias {r['reward_bias']:.3f} (finished valid groups {r['reward_bias_valid']:.3f})  "
            f"step p99/median "
            f"{r['step_p99_over_median']:.2f}  simulator error {error}",
            flush=True,
        )
    partial = result["real"]["partial"]
    print(
        f"  partial iterations (at most {REAL_SPEC['token_budget']} decode steps): {partial['iterations']}, "
        f"p99/median {partial['iteration_p99_over_median']:.2f}",
        flush=True,
    )
    staleness = result["real"]["staleness_colocated"]
    print(
        f"  staleness_colocated (bound {REAL_SPEC['staleness']}, reuse ratio {REAL_SPEC['reuse_ratio']}): "
        f"{staleness['reused_groups']} of {staleness['trained_groups']} trained groups kept from the step before",
        flush=True,
    )
    for key in (
        "seamless_vs_naive",
        "seamless_vs_verl_sync",
        "partial_vs_verl_sync",
        "colocate_async_vs_verl_sync",
        "partial_vs_colocate_async",
        "staleness_colocated_vs_naive",
        "staleness_colocated_vs_seamless",
    ):
        print(f"  {key}: {result['real'][key]:.2f}x", flush=True)
    rep = result["real"]["repetition"]
    print(
        f"  repeat detection: cost per generated token {rep['cost']:+.1%} (matched lengths and seeds, each arm "
        f"first and second, {rep['sampled_stopped']['stopped']}/{rep['sampled_stopped']['responses']} sampled "
        f"responses stopped, {rep['replayed_equal']['equal']}/{rep['replayed_equal']['responses']} replayed alike) "
        f"({rep['per_token_s']['off'] * 1e3:.2f} -> {rep['per_token_s']['on'] * 1e3:.2f} ms); greedy "
        f"responses looping {rep['looping_responses']}/{rep['greedy_responses']}, their tokens "
        f"{rep['looping_tokens']['off']} -> {rep['looping_tokens']['on']} (all greedy tokens "
        f"{rep['all_tokens']['off']} -> {rep['all_tokens']['on']})",
        flush=True,
    )


def _run(args: argparse.Namespace) -> int:
    parts = set(args.only or (["simulated"] if args.no_real else ["simulated", "one-engine", "two-engines"]))
    result: dict = {"trace": {"mimo_scale": MIMO_SCALE, "real": REAL_SPEC["trace"]}, "real": None}
    if "simulated" in parts:
        _simulated_part(result)
    if "one-engine" in parts:
        _one_engine_part(result)
    if "two-engines" in parts:
        result["two_engines"] = two_engines(ENGINE_SPEC)
        print_two_engines(result["two_engines"])
    if args.plot:
        print(f"timeline: {timeline_plot(args.plot)}", flush=True)
        if "two_engines" in result:
            figure = args.plot.with_name(f"{args.plot.stem}_two_engines{args.plot.suffix}")
            print(f"two engines: {two_engines_plot(result['two_engines'], figure)}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=float))
        print(f"numbers: {args.json}", flush=True)
    return 0


BENCHMARK = CliCommand(
    "rollout", "rollout schedulers: real vLLM-CPU generation and a MiMo-scale simulator", _configure, _run
)
