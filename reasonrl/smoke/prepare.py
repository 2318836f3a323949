"""Build (once) and cache the smoke-run assets: tiny model + tokenizer, train/val parquet.

Layout under ``root`` (default ``$REASONRL_CACHE`` or ``~/.cache/reasonrl``, then ``smoke/``)::

    model/   Hugging Face model + tokenizer (+ reasonrl_tiny_model.json summary)
    data/<recipe>/   train.parquet, val.parquet in the recipe's task mix (``reasonrl.smoke.data``)
    data/<sft recipe>/   sft_train.parquet, sft_val.parquet (``reasonrl sft``'s cpu_tiny preset)
    STAMP    the spec digest and data layout; a different one rebuilds everything
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path

from omegaconf import OmegaConf

from reasonrl.smoke.arithmetic import make_problems
from reasonrl.smoke.data import sft_rows, write_parquet
from reasonrl.smoke.model import PASS_RATES_FILE, TinyModelSpec, build_tiny_model

TRAIN_PROBLEMS = 1024
VAL_PROBLEMS = 256
SFT_PROBLEMS, SFT_VAL_PROBLEMS = 512, 64
#: Recipes whose data sets are written with the model (others: on first use, plain problems).
RECIPES = ("mimo", "kimi_k15", "longcat", "nemotron")
DATA_LAYOUT = "per-recipe-v3"  # v2: extra_info.pass_rate on the training rows; v3: extra_info.question


def default_root() -> Path:
    return Path(os.environ.get("REASONRL_CACHE", Path.home() / ".cache" / "reasonrl")) / "smoke"


def prepare(root: Path | None = None, spec: TinyModelSpec = TinyModelSpec(), force: bool = False) -> Path:
    """Make sure ``root`` holds the assets for ``spec``; return ``root``. Launches that start at
    once share one build: the first builds under a lock beside ``root``, the others wait for it
    and find the assets (a build removes an old tree first, which must not happen under a reader)."""
    root = Path(root or default_root())
    stamp, identity = root / "STAMP", f"{spec.digest()} {DATA_LAYOUT}"
    if not force and stamp.exists() and stamp.read_text().strip() == identity:
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and stamp.exists() and stamp.read_text().strip() == identity:
            return root  # built by the launch that held the lock
        return _build(root, spec, stamp, identity)


def _build(root: Path, spec: TinyModelSpec, stamp: Path, identity: str) -> Path:
    if root.exists():
        shutil.rmtree(root)
    train, val = split_problems(spec)
    print(f"[reasonrl smoke] building tiny model and data in {root} ...", flush=True)
    summary = build_tiny_model(root / "model", spec, eval_problems=train, held_out=val)
    for recipe in RECIPES:
        write_recipe_data(root, recipe, spec)
    stamp.write_text(identity)
    print(
        f"[reasonrl smoke] {summary['parameters']:,} parameters; warm-start loss "
        f"{summary['warmup_loss_first']:.3f} -> {summary['warmup_loss_last']:.3f}; "
        f"greedy accuracy {summary['greedy_accuracy_on_rl_problems']:.1%} on the RL problems, "
        f"{summary['greedy_accuracy_on_validation_problems']:.1%} on the validation problems (neither seen in the warm start); "
        f"exact responses by format {summary['greedy_exact_response_by_format']}; "
        f"mean pass rate of 8 sampled answers on the RL problems {summary['mean_sampled_pass_rate']:.1%}",
        flush=True,
    )
    return root


def split_problems(spec: TinyModelSpec):
    """The RL (train) and validation problems: disjoint, and never in the warm start."""
    problems = make_problems(TRAIN_PROBLEMS + VAL_PROBLEMS, seed=spec.seed, max_operand=spec.max_operand)
    return problems[:TRAIN_PROBLEMS], problems[TRAIN_PROBLEMS:]


def write_recipe_data(root: Path, recipe: str, spec: TinyModelSpec = TinyModelSpec()) -> Path:
    """``data/<recipe>/{train,val}.parquet`` in the recipe's task mix (``reasonrl.smoke.data``)."""
    train, val = split_problems(spec)
    folder = Path(root) / "data" / recipe
    pass_rates = json.loads((Path(root) / "model" / PASS_RATES_FILE).read_text())
    write_parquet(train, "train", folder / "train.parquet", recipe, pass_rates=pass_rates)
    write_parquet(val, "test", folder / "val.parquet", recipe)
    return folder


def ensure(config=None) -> None:
    """The cpu_tiny preset's prepare step (``reasonrl.prepare``): build the assets if missing,
    and the run's recipe's data set (a recipe reasonrl does not ship gets plain problems)."""
    root = prepare()
    recipe = str(OmegaConf.select(config, "reasonrl.recipe.name") or "") if config is not None else ""
    if recipe and not (root / "data" / recipe / "train.parquet").exists():
        write_recipe_data(root, recipe)


def sft_problems(spec: TinyModelSpec = TinyModelSpec()):
    """The SFT stage's train and validation problems: disjoint from the RL and validation
    problems (the RL run and the evaluation after SFT see problems SFT did not)."""
    train, val = split_problems(spec)
    taken = set(train) | set(val)
    every = make_problems((spec.max_operand + 1) ** 2, seed=spec.seed + 2, max_operand=spec.max_operand)
    rest = [p for p in every if p not in taken]
    return rest[:SFT_PROBLEMS], rest[SFT_PROBLEMS : SFT_PROBLEMS + SFT_VAL_PROBLEMS]


def write_sft_data(root: Path, recipe: str, task_mix: str, spec: TinyModelSpec = TinyModelSpec()) -> Path:
    """``data/<recipe>/sft_{train,val}.parquet``: the SFT recipe's rows in its RL recipe's task mix."""
    import pandas as pd
    from transformers import AutoTokenizer

    eos = AutoTokenizer.from_pretrained(Path(root) / "model").eos_token
    folder = Path(root) / "data" / recipe
    folder.mkdir(parents=True, exist_ok=True)
    for name, problems in zip(("sft_train", "sft_val"), sft_problems(spec)):
        partial = folder / f".{name}.{os.getpid()}.partial"
        pd.DataFrame(sft_rows(problems, task_mix, eos)).to_parquet(partial)
        partial.rename(folder / f"{name}.parquet")  # whole or absent: launches may share the cache
    return folder


def ensure_sft(config) -> None:
    """The SFT cpu_tiny preset's prepare step: the assets, and the SFT recipe's data set in the task
    mix of the RL recipe it starts (``reasonrl.recipe.rl_recipe``)."""
    root = prepare()
    recipe = str(OmegaConf.select(config, "reasonrl.recipe.name"))
    task_mix = str(OmegaConf.select(config, "reasonrl.recipe.rl_recipe") or "")
    if not (root / "data" / recipe / "sft_train.parquet").exists():
        write_sft_data(root, recipe, task_mix)
