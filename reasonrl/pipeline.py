"""``reasonrl pipeline recipe=mimo --demo DIR``: a report's whole post-training path on the smoke
task, on CPU — curate the RL data, cold-start SFT, RL from the SFT model, evaluate before and
after — each stage a reasonrl command in its own process (the commands a user runs at scale,
printed as they start), resumable by stage.

    DIR/inputs/  raw.jsonl (the RL problems with their pass rates, and rows curation must drop:
                 duplicates, problems of the benchmark, unverifiable references), bench.jsonl
    DIR/data/    `reasonrl data curate --config <recipe>` (card.md, train.parquet)
    DIR/sft/     `reasonrl sft recipe=<recipe>_sft +preset=cpu_tiny` (sft_output.json)
    DIR/rl/      `reasonrl train recipe=<recipe> +preset=cpu_tiny` from the SFT model, on the curated data
    DIR/eval/    `reasonrl eval run` of the start, SFT and RL models; `reasonrl eval compare`
    DIR/results.md  the before/after table (and eval/compare.png)

A stage that finished leaves ``STAGE_DONE.json`` and is skipped on the next launch; one stopped
midway resumes by its own means (curation by stage, verl from its last checkpoint, evaluation by
problem). Ctrl-C reaches the running stage, which stops cleanly; run the same command again.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from reasonrl.child_process import run_through_ctrl_c
from reasonrl.console import VERL_CONSOLE_ENV
from reasonrl.errors import UserError

DONE = "STAGE_DONE.json"
SETTINGS_FILE = "pipeline.json"
#: RL recipe -> its SFT recipe; the demo's data is plain math (no reasoning toggle per row, which
#: the nemotron recipe's rows need), so mimo and longcat
DEMO_RECIPES = {"mimo": "mimo_sft", "longcat": "longcat_sft"}
#: the benchmark: the first validation problems (in no SFT or RL rows; the 4 planted in the source
#: are what decontamination must drop)
BENCH_PROBLEMS = 64


def demo_inputs(folder: Path) -> dict:
    """The demo's source and benchmark, from the smoke task: every RL problem with its sampled pass
    rate, plus rows the curation must drop, each kind counted (the card shows where they went)."""
    from reasonrl.smoke.model import PASS_RATES_FILE
    from reasonrl.smoke.prepare import TinyModelSpec, prepare, split_problems

    root = prepare()
    train, val = split_problems(TinyModelSpec())
    rates = json.loads((root / "model" / PASS_RATES_FILE).read_text())
    bench = val[:BENCH_PROBLEMS]
    rows = [{"question": p.prompt, "answer": p.answer, "pass_rate": float(r)} for p, r in zip(train, rates)]
    planted = {
        "duplicate": [dict(row) for row in rows[:4]],
        "benchmark_problem": [{"question": p.prompt, "answer": p.answer, "pass_rate": 0.5} for p in bench[:4]],
        "unverifiable_reference": [
            {"question": p.prompt, "answer": "see the worked solution", "pass_rate": 0.5} for p in val[-4:]
        ],
    }
    folder.mkdir(parents=True, exist_ok=True)
    source = rows + [row for kind in planted.values() for row in kind]
    (folder / "raw.jsonl").write_text("".join(json.dumps(row) + "\n" for row in source))
    (folder / "bench.jsonl").write_text(
        "".join(json.dumps({"problem": p.prompt, "answer": p.answer}) + "\n" for p in bench)
    )
    return {"rows": len(source), "planted": {kind: len(kind_rows) for kind, kind_rows in planted.items()}}


def reasonrl(*args: str) -> list[str]:
    return [sys.executable, "-m", "reasonrl.cli.main", *args]


class Pipeline:
    """The demo's stages in order; ``run()`` skips those done and returns the results table."""

    def __init__(self, recipe: str, root: Path, sft_steps: int, rl_steps: int, log=print) -> None:
        if recipe not in DEMO_RECIPES:
            raise UserError("recipe", f"the demo runs {sorted(DEMO_RECIPES)}; got {recipe!r}")
        self.recipe, self.root, self.log = recipe, Path(root), log
        self.settings = {"recipe": recipe, "sft_steps": sft_steps, "rl_steps": rl_steps}

    def check_settings(self) -> None:
        """A folder keeps one pipeline: a relaunch with other settings would mix two runs."""
        path = self.root / SETTINGS_FILE
        if path.exists():
            before = json.loads(path.read_text())
            if before != self.settings:
                changed = {k: (before.get(k), v) for k, v in self.settings.items() if before.get(k) != v}
                raise UserError(str(self.root), f"holds a pipeline run with other settings {changed}: use a new folder")
        self.root.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.settings) + "\n")

    def stage(self, name: str, run) -> dict:
        folder = self.root / name
        done = folder / DONE
        if done.exists():
            self.log(f"[pipeline] {name}: done, skipped")
            return json.loads(done.read_text())
        folder.mkdir(parents=True, exist_ok=True)
        record = run(folder)
        done.write_text(json.dumps(record, indent=1) + "\n")
        return record

    def command(self, folder: Path, args: list[str], log_name: str) -> None:
        log = folder / log_name
        self.log(f"[pipeline] {folder.relative_to(self.root)}: reasonrl {' '.join(args[3:])}  (log: {log})")
        with open(log, "a") as out:
            code = run_through_ctrl_c(args, out, env={**os.environ, VERL_CONSOLE_ENV: "1"})
        if code != 0:
            raise RuntimeError(f"stage {folder.relative_to(self.root)} failed (exit {code}); its log: {log}")

    def run(self) -> str:
        from reasonrl.smoke.prepare import prepare

        self.check_settings()
        inputs = self.stage("inputs", demo_inputs)
        self.log(f"[pipeline] inputs: {inputs['rows']} rows, planted {inputs['planted']}")
        bench = self.root / "inputs" / "bench.jsonl"
        data = self.stage("data", self.curate)
        sft = self.stage("sft", self.sft)
        rl = self.stage("rl", lambda folder: self.rl(folder, data["train"], sft["hf_model"]))
        models = {"start": str(prepare() / "model"), "sft": sft["hf_model"], "rl": rl["hf_model"]}
        evaluated = {label: self.stage(f"eval/{label}", lambda f, m=model: self.evaluate(f, m, bench))
                     for label, model in models.items()}  # fmt: skip
        return self.compare(evaluated)

    def curate(self, folder: Path) -> dict:
        source = self.root / "inputs"
        self.command(
            folder,
            reasonrl("data", "curate", "--config", self.recipe, "--source", str(source / "raw.jsonl"), "--out",
                     str(folder), "--eval", str(source / "bench.jsonl"), "--field", "pass_rate=pass_rate", "--no-progress"),
            "curate.log",
        )  # fmt: skip
        card = json.loads((folder / "card.json").read_text())
        return {"train": card["output"]["path"], "rows": card["output"]["rows"]}

    def sft(self, folder: Path) -> dict:
        steps = self.settings["sft_steps"]
        self.command(
            folder,
            reasonrl("sft", f"recipe={DEMO_RECIPES[self.recipe]}", "+preset=cpu_tiny", f"trainer.default_local_dir={folder}",
                     f"trainer.total_training_steps={steps}", f"trainer.save_freq={steps}", f"trainer.test_freq={steps}"),
            "sft.log",
        )  # fmt: skip
        return json.loads((folder / "sft_output.json").read_text())

    def rl(self, folder: Path, train: str, model: str) -> dict:
        steps = self.settings["rl_steps"]
        self.command(
            folder,
            reasonrl("train", f"recipe={self.recipe}", "+preset=cpu_tiny", f"actor_rollout_ref.model.path={model}",
                     f"data.train_files={train}", f"trainer.default_local_dir={folder}",
                     f"trainer.total_training_steps={steps}", f"trainer.test_freq={steps}",
                     # the Hugging Face weights with each checkpoint: what the evaluation serves
                     "actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]"),
            "train.log",
        )  # fmt: skip
        step = (folder / "latest_checkpointed_iteration.txt").read_text().strip()
        model = folder / f"global_step_{step}" / "actor" / "huggingface"
        if not any(model.glob("*.safetensors")):
            raise RuntimeError(f"the RL run saved no Hugging Face weights in {model}")
        return {"hf_model": str(model), "step": int(step)}

    def evaluate(self, folder: Path, model: str, bench: Path) -> dict:
        self.command(
            folder,
            reasonrl("eval", "run", "--model", model, "--bench", str(bench), "--out", str(folder), "--recipe",
                     self.recipe, "--n", "4", "--max-tokens", "24", "--max-model-len", "64", "--template", "math={question}"),
            "eval.log",
        )  # fmt: skip
        return json.loads((folder / "results.json").read_text())

    def compare(self, evaluated: dict) -> str:
        folders = [str(self.root / "eval" / label) for label in evaluated]
        args = reasonrl("eval", "compare", *folders, "--plot", str(self.root / "eval" / "compare.png"))
        table_file = self.root / "results.md"
        with open(self.root / "eval" / "compare.log", "w") as out:
            if run_through_ctrl_c(args, out) != 0:
                raise RuntimeError(f"reasonrl eval compare failed; see {self.root / 'eval' / 'compare.log'}")
        table = (self.root / "eval" / "compare.log").read_text()
        table_file.write_text(
            f"# reasonrl pipeline recipe={self.recipe} --demo\n\n"
            "Start = the smoke model; sft = after `reasonrl sft`; rl = after `reasonrl train` from it.\n\n" + table
        )
        return table
