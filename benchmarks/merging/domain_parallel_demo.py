"""The domain-parallel pipeline's CPU demo (LongCat §3.4): two smoke domains of two-digit sums —
without a carry (ones digits sum below 10) and with one — as verl parquets and a pipeline YAML for
the CPU preset, then ``reasonrl domain-parallel --config`` on it as a user runs it.

    .venv/bin/python -m benchmarks.merging.domain_parallel_demo DIR [--steps 2]

It builds on the CPU smoke assets (``reasonrl.smoke``), which is why it lives here and not in the
plugin (a plugin uses no toy assets); the merging README's table is one run of it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import yaml


def write_demo(folder: Path, steps: int = 2) -> Path:
    """Two smoke domains of two-digit sums — without a carry (ones digits sum below 10) and with
    one — as verl parquets, and a pipeline YAML for the CPU preset; returns the path of the YAML."""
    from reasonrl.smoke.data import write_parquet
    from reasonrl.smoke.model import TinyModelSpec
    from reasonrl.smoke.prepare import prepare, split_problems

    prepare()
    train, val = split_problems(TinyModelSpec())

    def carry(problem) -> bool:
        return (problem.a % 10) + (problem.b % 10) >= 10

    domains = {}
    for name, keep in (("no_carry", lambda p: not carry(p)), ("carry", carry)):
        data = folder / "data" / name
        write_parquet([p for p in train if keep(p)], "train", data / "train.parquet", "longcat")
        write_parquet([p for p in val if keep(p)], "test", data / "val.parquet", "longcat")
        domains[name] = {"train_files": str(data / "train.parquet"), "val_files": str(data / "val.parquet")}
    spec = {
        "recipe": "longcat",
        "workdir": "runs",
        "domains": domains,
        "overrides": ["+preset=cpu_tiny", "trainer.test_freq=-1", "trainer.val_before_train=false"],
        "expert_overrides": [f"trainer.total_training_steps={steps}"],
        "general_overrides": [f"trainer.total_training_steps={steps}"],
        "eval_questions": 64,
        "eval_max_tokens": 16,
    }
    path = folder / "pipeline.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="where the data, the pipeline YAML and its runs go")
    parser.add_argument("--steps", type=int, default=2, help="RL steps per stage")
    args = parser.parse_args(argv)
    config = write_demo(args.folder, args.steps)
    return subprocess.call([sys.executable, "-m", "reasonrl.cli.main", "domain-parallel", "--config", str(config)])


if __name__ == "__main__":
    raise SystemExit(main())
