"""Run every bad-input case of the ``reasonrl`` commands and write docs/bad_input.md.

Each case runs the real console command (``python -m reasonrl.cli.main ...``) in a fresh folder
holding only its inputs, and the table records what a user sees: the first line of stderr, the
exit code, whether a traceback was printed, and which files the command wrote. Run it after
changing a refusal:

    .venv/bin/python scripts/bad_input_table.py            # all cases, rewrites docs/bad_input.md
    .venv/bin/python scripts/bad_input_table.py --list     # the case names (tests/test_bad_input_doc.py)

Cases that need the smoke assets (``reasonrl smoke prepare``) build them first if missing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "bad_input.md"


@dataclass(frozen=True)
class Case:
    """``setup(folder)`` writes the inputs and returns the command's arguments (after ``reasonrl``)."""

    name: str
    given: str
    setup: Callable[[Path], list[str]]
    env: tuple[tuple[str, str], ...] = ()


def _smoke_model() -> Path:
    from reasonrl.smoke.prepare import prepare

    return prepare() / "model"


def _parquet(path: Path, drop: tuple[str, ...] = ()) -> Path:
    import pandas as pd

    rows = [
        {
            "data_source": "toy",
            "prompt": [{"role": "user", "content": "1+1="}],
            "reward_model": {"style": "rule", "ground_truth": "2"},
            "extra_info": {"index": 0},
        }
    ]
    pd.DataFrame(rows).drop(columns=list(drop)).to_parquet(path)
    return path


def _hf_folder(folder: Path) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


def _jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def _judge_files(folder: Path, solutions: list | None = None, problems: list | None = None) -> list[str]:
    problems = problems or [{"problem_id": "sum", "tests": {"inputs": ["1 2\n"], "outputs": ["3\n"]}}]
    solutions = solutions or [{"problem_id": "sum", "code": "a, b = map(int, input().split())\nprint(a + b)"}]
    return [
        *["--problems", str(_jsonl(folder / "p.jsonl", problems))],
        *["--solutions", str(_jsonl(folder / "s.jsonl", solutions))],
        *["--out", str(folder / "verdicts.jsonl")],
    ]


def _checkpoint(folder: Path, cut: int = 0) -> Path:
    """A two-tensor Hugging Face folder (config.json, model.safetensors), cut short by ``cut`` bytes."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["TinyForCausalLM"], "model_type": "tiny"}))
    shard = folder / "model.safetensors"
    save_file({"model.embed_tokens.weight": torch.zeros(4, 3), "model.norm.weight": torch.ones(8)}, str(shard))
    if cut:
        shard.write_bytes(shard.read_bytes()[:-cut])
    return folder


def _merge(folder: Path, cut: int = 0, text: str | None = None) -> list[str]:
    _checkpoint(folder / "base")
    _checkpoint(folder / "e1", cut=cut)
    config = folder / "merge.yaml"
    config.write_text(
        text
        or json.dumps(
            {"method": "fusion", "base": str(folder / "base"), "experts": [str(folder / "e1")], "output": "out"}
        )
    )
    return ["merge", "--config", str(config)]


def _domain_parallel(folder: Path, **change) -> list[str]:
    for name in ("a", "b"):
        _parquet(folder / f"{name}.parquet")
    values = {
        "recipe": "longcat",
        "workdir": "runs",
        "domains": {
            n: {"train_files": str(folder / f"{n}.parquet"), "val_files": str(folder / f"{n}.parquet")} for n in "ab"
        },
        "overrides": ["+preset=cpu_tiny"],
        **change,
    }
    config = folder / "pipeline.yaml"
    config.write_text(json.dumps(values))
    return ["domain-parallel", "--config", str(config)]


def _puzzle(folder: Path, settings: str) -> list[str]:
    config = folder / "puzzle.yaml"
    config.write_text(settings)
    return ["puzzle", "build-library", "--run-dir", "puzzle-run", "--config", str(config)]


def _long2short_sample(folder: Path) -> list[str]:
    return [
        *["long2short", "sample", "--model", str(folder / "no_model")],
        *["--data", str(_parquet(folder / "train.parquet")), "--sft-out", "sft.parquet", "--dpo-out", "dpo.parquet"],
    ]


def _run_with_corrupt_step(folder: Path) -> Path:
    """A run folder whose newest step (2, the one verl resumes from) has a shard cut short, the
    step before intact: as a kill during a save or a full disk leaves it."""
    import torch

    run = folder / "run"
    for step in (1, 2):
        actor = run / f"global_step_{step}" / "actor"
        actor.mkdir(parents=True)
        torch.save({"w": torch.ones(64)}, actor / "model_world_size_1_rank_0.pt")
    shard = run / "global_step_2" / "actor" / "model_world_size_1_rank_0.pt"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    (run / "latest_checkpointed_iteration.txt").write_text("2")
    return run


TINY = ["recipe=mimo", "+preset=cpu_tiny"]

CASES: list[Case] = [
    # reasonrl train: the config, before anything runs
    Case("train-recipe-unknown", "`recipe=mimoo`", lambda d: ["train", "recipe=mimoo"]),
    Case(
        "train-option-without-plus",
        "`reasonrl/rollout=partial` (no `+`)",
        lambda d: ["train", *TINY, "reasonrl/rollout=partial"],
    ),
    Case(
        "train-long2short-no-model",
        "`recipe=kimi_k15_long2short` without a model path",
        lambda d: ["train", "recipe=kimi_k15_long2short"],
    ),
    Case(
        "train-n-zero", "`actor_rollout_ref.rollout.n=0`", lambda d: ["train", *TINY, "actor_rollout_ref.rollout.n=0"]
    ),
    Case("train-type", "`data.train_batch_size=abc`", lambda d: ["train", *TINY, "data.train_batch_size=abc"]),
    Case(
        "train-plus-typo",
        "`+data.train_batch_sise=8` (Hydra's own hint for a misspelt key)",
        lambda d: ["train", *TINY, "+data.train_batch_sise=8"],
    ),
    Case(
        "train-knob-range",
        "`reasonrl.sampling.alpha=2` (out of range)",
        lambda d: ["train", *TINY, "reasonrl.sampling.alpha=2"],
    ),
    Case(
        "train-plugin-disabled",
        "the sampling plugin switched off, its option asked for",
        lambda d: ["train", *TINY],
        env=(("REASONRL_DISABLE_PLUGINS", "sampling"),),
    ),
    # reasonrl train: the files the run reads, in the driver before Ray starts
    Case(
        "train-model-missing",
        "`actor_rollout_ref.model.path=` a folder that does not exist",
        lambda d: ["train", "recipe=mimo", f"actor_rollout_ref.model.path={d / 'no_model'}"],
    ),
    Case(
        "train-parquet-column",
        "a training parquet without `reward_model`",
        lambda d: [
            *["train", "recipe=mimo", f"actor_rollout_ref.model.path={_hf_folder(d / 'model')}"],
            f"data.train_files={_parquet(d / 'train.parquet', drop=('reward_model',))}",
            f"data.val_files={_parquet(d / 'val.parquet')}",
            f"trainer.default_local_dir={d / 'run'}",
        ],
    ),
    Case(
        "train-judge-sandbox",
        "mimo's code problems where bubblewrap is missing",
        lambda d: ["train", *TINY, f"trainer.default_local_dir={d / 'run'}"],
        env=(("PATH", str(Path(sys.executable).parent)),),
    ),
    Case(
        "train-checkpoint-corrupt",
        "the step a resume starts from has a shard cut in half",
        lambda d: ["train", *TINY, f"trainer.default_local_dir={_run_with_corrupt_step(d)}"],
    ),
    Case(
        "train-run-folder",
        "`trainer.default_local_dir` that cannot be created (under a file)",
        lambda d: ["train", *TINY, f"trainer.default_local_dir={_jsonl(d / 'a_file', [])}/run"],
    ),
    # reasonrl judge
    Case(
        "judge-bad-json",
        "a solutions line that is not JSON",
        lambda d: ["judge", *_judge_files(d, solutions=['{"problem_id": "sum", "code": '])],
    ),
    Case(
        "judge-no-code",
        'a solution without `"code"`',
        lambda d: ["judge", *_judge_files(d, solutions=[{"problem_id": "sum"}])],
    ),
    Case(
        "judge-language",
        "`language: rust`",
        lambda d: ["judge", *_judge_files(d, solutions=[{"problem_id": "sum", "code": "x", "language": "rust"}])],
    ),
    Case("judge-time-limit", "`--time-limit -1`", lambda d: ["judge", *_judge_files(d), "--time-limit", "-1"]),
    Case(
        "judge-no-sandbox",
        "bubblewrap missing (the sandbox cannot start)",
        lambda d: ["judge", *_judge_files(d)],
        env=(("PATH", str(Path(sys.executable).parent)),),
    ),
    # reasonrl merge, domain-parallel, puzzle, long2short
    Case("merge-truncated", "an expert's `model.safetensors` cut short by 6 bytes", lambda d: _merge(d, cut=6)),
    Case(
        "merge-yaml", "a merge config that is not valid YAML", lambda d: _merge(d, text="method: fusion\nexperts: [a\n")
    ),
    Case("domain-parallel-recipe", "`recipe: longkat`", lambda d: _domain_parallel(d, recipe="longkat")),
    Case(
        "domain-parallel-override",
        "an override with a misspelt verl key",
        lambda d: _domain_parallel(d, overrides=["+preset=cpu_tiny", "trainer.total_training_stepz=3"]),
    ),
    Case("puzzle-type", "`params_fraction: abc`", lambda d: _puzzle(d, "params_fraction: abc\n")),
    Case(
        "puzzle-menu",
        "a menu variant the parent cannot take (`kv_heads: 3`)",
        lambda d: _puzzle(d, "toy_steps: 1\nmenu: {attention: [parent, {kv_heads: 3}], ffn: [1.0]}\n"),
    ),
    Case("long2short-no-model", "`long2short sample --model` a folder that does not exist", _long2short_sample),
    # reasonrl sft, pipeline
    Case("sft-recipe-unknown", "`recipe=mimo_sfx`", lambda d: ["sft", "recipe=mimo_sfx"]),
    Case("sft-no-base-model", "`recipe=nemotron_sft` without `model.path`", lambda d: ["sft", "recipe=nemotron_sft"]),
    Case(
        "sft-no-hf-model",
        "`checkpoint.save_contents=[model]` (no Hugging Face model for RL)",
        lambda d: ["sft", "recipe=mimo_sft", "checkpoint.save_contents=[model]"],
    ),
    Case(
        "sft-data-missing",
        "`data.train_files` a file that does not exist",
        lambda d: ["sft", "recipe=mimo_sft", "+preset=cpu_tiny", f"data.train_files={d / 'none.parquet'}"],
    ),
    Case(
        "pipeline-recipe",
        "`pipeline recipe=nemotron --demo DIR`",
        lambda d: ["pipeline", "recipe=nemotron", "--demo", "demo"],
    ),
    # reasonrl mtp, smoke, plot
    Case(
        "mtp-attach-missing",
        "`mtp attach --checkpoint` a folder that does not exist",
        lambda d: [
            *["mtp", "attach", "--out", str(d / "out"), "--checkpoint", str(d / "none")],
            *["--data", str(_jsonl(d / "t.jsonl", [{"input_ids": [1]}])), "--held-out", str(d / "t.jsonl")],
        ],
    ),
    Case("plot-missing", "`reasonrl plot` a folder that does not exist", lambda d: ["plot", str(d / "no_run")]),
]


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def run_case(case: Case) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"bad-input-{case.name}-") as name:
        folder = Path(name)
        inputs = folder / "in"
        inputs.mkdir()
        argv = case.setup(inputs)
        before = _files(folder)
        start = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "reasonrl.cli.main", *argv],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, **dict(case.env)},
        )
        written = sorted(_files(folder) - before)
        shown = str(folder)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        message = next((line for line in lines if line.startswith("reasonrl")), lines[0] if lines else "")
        return {
            "name": case.name,
            "given": case.given,
            "command": "reasonrl " + " ".join(a.replace(shown + "/in/", "").replace(shown, ".") for a in argv),
            "message": message.replace(shown + "/in/", "").replace(shown, "."),
            "exit": result.returncode,
            "traceback": "Traceback" in result.stderr,
            "written": written,
            "seconds": time.monotonic() - start,
        }


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(rows: list[dict]) -> str:
    lines = [
        "# Bad input: what each command says",
        "",
        "Generated by `scripts/bad_input_table.py` (do not edit by hand): every case below ran as a",
        "user runs it, in a fresh folder holding only its inputs. *Written* lists the files the command",
        "left there (none: nothing was written); *time* is the wall-clock time to the refusal on",
        "this 2-core machine. `reasonrl --debug <command> ...` (or `REASONRL_DEBUG=1`) shows the",
        "traceback behind a message. The error style: `reasonrl <command>: <file or key>: <what is wrong>`,",
        "exit code 2.",
        "",
        "| case | input | message (first line of stderr) | exit | traceback | written | time |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        written = ", ".join(f"`{w}`" for w in row["written"]) or "nothing"
        lines.append(
            f"| `{row['name']}` | {_cell(row['given'])} | `{_cell(row['message'])}` | {row['exit']} | "
            f"{'yes' if row['traceback'] else 'no'} | {written} | {row['seconds']:.1f} s |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print the case names and exit")
    parser.add_argument("--only", nargs="*", default=None, help="run only these cases (prints, writes no doc)")
    args = parser.parse_args()
    if args.list:
        print("\n".join(case.name for case in CASES))
        return 0
    _smoke_model()
    cases = [c for c in CASES if args.only is None or c.name in args.only]
    rows = []
    for index, case in enumerate(cases, 1):
        row = run_case(case)
        rows.append(row)
        print(f"[{index}/{len(cases)}] {case.name}: exit {row['exit']} in {row['seconds']:.1f} s: {row['message']}")
    if args.only is None:
        DOC.write_text(table(rows))
        print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
