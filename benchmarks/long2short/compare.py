"""The long2short methods side by side on the CPU smoke task (Kimi §2.4): mean response length and
reward of each method's model — ``reasonrl bench long2short --demo DIR`` (from a checkout: it builds
on the CPU smoke assets, which no plugin uses).

From the long-CoT toy model (``toy.py``; the smoke model is the short-CoT one), each method is the
product's own command, run as a user would:

- **merge**: ``reasonrl merge`` (``method: average``) of the long- and the short-CoT model;
- **shortest rejection sampling + SFT**: ``reasonrl long2short sample`` (n = 8), then verl's SFT
  trainer (torchrun, FSDP on CPU) on the shortest correct responses;
- **DPO**: ``reasonrl long2short dpo`` on the pairs of the same samples;
- **long2short RL**: ``reasonrl train recipe=kimi_k15_long2short`` from the long-CoT model with a
  cut maximum response length.

Every model then answers the validation questions greedily (``reasonrl.greedy_answers``: vLLM,
the math reward): ``comparison.json``, ``comparison.md`` and ``comparison.png`` (tokens vs reward).
A stage whose model exists is skipped on the next launch.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import yaml

from reasonrl.child_process import run_through_ctrl_c
from reasonrl.contracts import CliCommand

#: the long-CoT model's longest answers (level 3, ~45 tokens) fit; the smoke model has 64 positions
LONG_MAX_TOKENS = 48
#: long2short RL's cut (Kimi: "a significantly reduced maximum rollout length"): level-1 answers fit
RL_MAX_RESPONSE = 24
HF_SAVE = "[model,optimizer,extra,hf_model]"


def _reasonrl(*args: str) -> list[str]:
    return [sys.executable, "-m", "reasonrl.cli.main", *args]


def _stage(name: str, command: list[str], logs: Path, log, env: dict | None = None, cwd: Path | None = None) -> None:
    logs.mkdir(parents=True, exist_ok=True)
    log(f"{name}: {' '.join(command[2:6])} ... (log: {logs / f'{name}.log'})")
    with open(logs / f"{name}.log", "w") as out:
        returncode = run_through_ctrl_c(command, out, env={**os.environ, **(env or {})}, cwd=cwd)
    if returncode != 0:
        raise RuntimeError(f"{name} failed; see {logs / f'{name}.log'}")


def verl_sft_command(model: Path, data: Path, out: Path, steps: int, lr: float) -> list[str]:
    """verl's own SFT trainer (``verl.trainer.sft_trainer``) on CPU: one torchrun process, FSDP2."""
    return [
        str(Path(sys.executable).parent / "torchrun"), "--standalone", "--nproc_per_node", "1",
        "-m", "verl.trainer.sft_trainer",
        f"data.train_files={data}", "data.train_batch_size=16", "data.micro_batch_size_per_gpu=16",
        "data.max_length=64", "data.num_workers=0", "data.use_dynamic_bsz=false",
        f"model.path={model}", "+model.override_config.attn_implementation=eager",
        "engine.strategy=fsdp2", "trainer.device=cpu", "trainer.logger=[console]",
        f"optim.lr={lr}", f"trainer.total_training_steps={steps}", f"trainer.save_freq={steps}",
        f"trainer.default_local_dir={out}", f"checkpoint.save_contents={HF_SAVE}",
    ]  # fmt: skip


def run_demo(folder: Path, rl_steps: int = 20, questions: int = 128, log=print) -> dict:
    from benchmarks.long2short.toy import train_long_cot_model
    from reasonrl.api import math_reward  # the rewards plugin's (long2short requires it)
    from reasonrl.greedy_answers import greedy_answers
    from reasonrl.smoke.model import TinyModelSpec, warmup_pool
    from reasonrl.smoke.prepare import prepare, split_problems, write_recipe_data

    root = prepare()
    data = write_recipe_data(root, "kimi_k15_long2short")
    models, logs = folder / "models", folder / "logs"
    short, long = root / "model", models / "long_cot"
    if not (long / "model.safetensors").exists():
        log("long_cot: fine-tuning the smoke model on think-first answers of three lengths")
        train, val = split_problems(TinyModelSpec())
        train_long_cot_model(short, long, warmup_pool(TinyModelSpec(), set(train) | set(val)))

    average = models / "average"
    if not average.exists():
        spec = {"method": "average", "experts": [str(long), str(short)], "output": str(average)}
        (folder / "average.yaml").write_text(yaml.safe_dump(spec))
        _stage("average", _reasonrl("merge", "--config", str(folder / "average.yaml")), logs, log)

    samples = folder / "samples"
    if not (samples / "dpo.parquet").exists():
        _stage("sample", _reasonrl(
            "long2short", "sample", "--model", str(long), "--data", str(data / "train.parquet"), "--n", "8",
            "--max-tokens", str(LONG_MAX_TOKENS), "--limit", "256", "--sft-out", str(samples / "sft.parquet"),
            "--dpo-out", str(samples / "dpo.parquet"), "--samples-out", str(samples / "samples.jsonl"),
        ), logs, log)  # fmt: skip

    sft = models / "shortest_sft"
    sft_steps = 30
    if not (sft / f"global_step_{sft_steps}" / "huggingface" / "model.safetensors").exists():
        command = verl_sft_command(long, samples / "sft.parquet", sft, sft_steps, 1e-4)
        _stage("sft", command, logs, log, env={"VERL_PLATFORM": "cpu"}, cwd=folder)

    dpo = models / "dpo"
    if not (dpo / "model.safetensors").exists():
        _stage("dpo", _reasonrl(
            "long2short", "dpo", "--model", str(long), "--pairs", str(samples / "dpo.parquet"), "--out", str(dpo),
            "--lr", "2e-5", "--steps", "40",
        ), logs, log)  # fmt: skip

    rl = models / "long2short_rl"
    if not (rl / "latest_checkpointed_iteration.txt").exists():
        _stage("rl", _reasonrl(
            "train", "recipe=kimi_k15_long2short", "+preset=cpu_tiny", f"actor_rollout_ref.model.path={long}",
            f"data.max_response_length={RL_MAX_RESPONSE}", f"trainer.total_training_steps={rl_steps}",
            "trainer.test_freq=-1", "trainer.val_before_train=false", f"trainer.default_local_dir={rl}",
            f"actor_rollout_ref.actor.checkpoint.save_contents={HF_SAVE}",
        ), logs, log)  # fmt: skip
    rl_step = (rl / "latest_checkpointed_iteration.txt").read_text().strip()

    candidates = {
        "short-CoT (smoke model)": short,
        "long-CoT (start)": long,
        "merge (average)": average,
        "shortest rejection + SFT": sft / f"global_step_{sft_steps}" / "huggingface",
        "DPO": dpo,
        "long2short RL": rl / f"global_step_{rl_step}" / "actor" / "huggingface",
    }
    log(f"answering {questions} validation questions greedily with {len(candidates)} models")
    answered = greedy_answers(candidates, {"val": str(data / "val.parquet")}, questions, LONG_MAX_TOKENS, math_reward)
    table = {label: {k: v for k, v in row["val"].items() if k != "answers"} for label, row in answered.items()}
    write_table(table, folder)
    return table


def write_table(table: dict, folder: Path) -> None:
    """``comparison.json``, ``comparison.md`` and the tokens-vs-reward plot ``comparison.png``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "comparison.json").write_text(json.dumps(table, indent=2))
    lines = ["| model | mean response length (tokens) | reward (greedy) |", "|---|---|---|"]
    lines += [f"| {label} | {row['mean_length']:.1f} | {row['reward']:.3f} |" for label, row in table.items()]
    (folder / "comparison.md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.5, 4))
    for label, row in table.items():
        axis.scatter(row["mean_length"], row["reward"], s=40)
        axis.annotate(label, (row["mean_length"], row["reward"]), textcoords="offset points", xytext=(5, 4), fontsize=8)
    axis.margins(x=0.3, y=0.1)  # room for the labels
    axis.set_xlabel("mean response length (tokens, greedy)")
    axis.set_ylabel("reward (greedy, validation)")
    axis.set_title("Kimi §2.4 long2short on the CPU smoke task")
    figure.tight_layout()
    figure.savefig(folder / "comparison.png", dpi=120)
    plt.close(figure)


def _configure(parser) -> None:
    parser.add_argument("--demo", type=Path, required=True, help="folder for the models, logs and the table")
    parser.add_argument("--rl-steps", type=int, default=20, help="long2short RL steps")
    parser.add_argument("--questions", type=int, default=128, help="validation questions answered per model")


def _run(args) -> int:
    try:
        table = run_demo(
            args.demo,
            args.rl_steps,
            args.questions,
            log=lambda line: print(f"[reasonrl] long2short: {line}", flush=True),
        )
    except RuntimeError as error:
        print(f"reasonrl bench long2short: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"[reasonrl] long2short: interrupted; the same command resumes ({args.demo})", flush=True)
        return 130
    print((args.demo / "comparison.md").read_text(), flush=True)
    print(f"long2short comparison: {json.dumps(table)}", flush=True)
    return 0


BENCHMARK = CliCommand(
    "long2short",
    "every long2short method (Kimi §2.4) on the CPU smoke task: mean length and reward (table + plot)",
    _configure,
    _run,
)
