"""Build (once) and cache the smoke-run assets: tiny model + tokenizer, train/val parquet.

Layout under ``root`` (default ``$REASONRL_CACHE`` or ``~/.cache/reasonrl``, then ``smoke/``)::

    model/   Hugging Face model + tokenizer (+ reasonrl_tiny_model.json summary)
    data/    train.parquet, val.parquet
    STAMP    the spec digest; a different spec rebuilds everything
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from reasonrl.smoke.arithmetic import make_problems
from reasonrl.smoke.data import write_parquet
from reasonrl.smoke.model import TinyModelSpec, build_tiny_model

TRAIN_PROBLEMS = 1024
VAL_PROBLEMS = 256


def default_root() -> Path:
    return Path(os.environ.get("REASONRL_CACHE", Path.home() / ".cache" / "reasonrl")) / "smoke"


def prepare(root: Path | None = None, spec: TinyModelSpec = TinyModelSpec(), force: bool = False) -> Path:
    """Make sure ``root`` holds the assets for ``spec``; return ``root``."""
    root = Path(root or default_root())
    stamp = root / "STAMP"
    if not force and stamp.exists() and stamp.read_text().strip() == spec.digest():
        return root
    if root.exists():
        shutil.rmtree(root)
    problems = make_problems(TRAIN_PROBLEMS + VAL_PROBLEMS, seed=spec.seed, max_operand=spec.max_operand)
    train, val = problems[:TRAIN_PROBLEMS], problems[TRAIN_PROBLEMS:]
    print(f"[reasonrl smoke] building tiny model and data in {root} ...", flush=True)
    summary = build_tiny_model(root / "model", spec, eval_problems=train, held_out=val)
    write_parquet(train, "train", root / "data" / "train.parquet")
    write_parquet(val, "test", root / "data" / "val.parquet")
    stamp.write_text(spec.digest())
    print(
        f"[reasonrl smoke] {summary['parameters']:,} parameters; warm-start loss "
        f"{summary['warmup_loss_first']:.3f} -> {summary['warmup_loss_last']:.3f}; "
        f"greedy accuracy {summary['greedy_accuracy_on_rl_problems']:.1%} on the RL problems, "
        f"{summary['greedy_accuracy_on_validation_problems']:.1%} on the validation problems (neither seen in the warm start)",
        flush=True,
    )
    return root


def ensure(config=None) -> None:
    """The cpu_tiny preset's prepare step (``reasonrl.prepare``): build the assets if missing."""
    prepare()
