"""``reasonrl merge --config merge.yaml``: merge Hugging Face checkpoints tensor by tensor.

The YAML names the method and its models and knobs (keys of :class:`MergeSpec`)::

    method: fusion            # LongCat §3.4: normalize, drop (DARE), erase, merge
    base: ckpt/sft            # θ_SFT
    experts: [ckpt/math, ckpt/code]
    output: ckpt/fused
    drop_rate: 0.0

Bad values stop the command before anything is written, naming the key (``merge.<key>``) or file
(:class:`reasonrl.errors.UserError`: ``reasonrl merge: <file>: <what is wrong>``, exit 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from reasonrl.config import ConfigError, knob, validate_group
from reasonrl.contracts import CliCommand, ConfigGroup
from reasonrl.errors import UserError
from reasonrl.plugins.merging.inputs import read_yaml


@dataclasses.dataclass
class MergeSpec:
    method: str = knob(help="fusion | average | task_arithmetic", choices=("fusion", "average", "task_arithmetic"))
    experts: list = knob(help="checkpoint folders: the experts (fusion, task_arithmetic) or the models averaged")
    output: str = knob(help="new folder for the merged checkpoint")
    base: str | None = knob(None, help="the base checkpoint θ_SFT (fusion, task_arithmetic)")
    normalize: bool = knob(True, help="fusion: rescale each task vector to the experts' mean L2 norm, per tensor")
    drop_rate: float = knob(
        0.0, help="fusion: DARE drop probability p (kept entries ÷ (1 − p))", low=0.0, high=1.0, high_open=True
    )
    erase: bool = knob(True, help="fusion: keep an expert's entry only with the sign of Σ_i τ_i")
    seed: int = knob(0, help="fusion: seed of the drop masks (per tensor: sha256(seed:name))")
    scale: float = knob(1.0, help="fusion / task_arithmetic: factor on the merged task vector")
    weights: list | None = knob(None, help="average: one weight per model (default equal)")

    def check(self) -> None:
        if self.method in ("fusion", "task_arithmetic") and not self.base:
            raise ConfigError(
                "merge.base", f"is required by method {self.method!r} (the checkpoint the task vectors start from)"
            )
        if self.method == "average":
            if self.base:
                raise ConfigError(
                    "merge.base", "method 'average' averages the experts' weights: list every model under experts"
                )
            if len(self.experts) < 2:
                raise ConfigError("merge.experts", f"method 'average' needs at least 2 models, got {len(self.experts)}")
            if self.weights is not None and (
                len(self.weights) != len(self.experts)
                or any(not isinstance(w, (int, float)) or w < 0 for w in self.weights)
                or sum(self.weights) <= 0
            ):
                raise ConfigError(
                    "merge.weights", f"needs {len(self.experts)} non-negative numbers with a positive sum"
                )
        elif not self.experts:
            raise ConfigError("merge.experts", "needs at least one checkpoint")
        bad = [e for e in self.experts if not isinstance(e, str)]
        if bad:
            raise ConfigError("merge.experts", f"a list of checkpoint folders, got {bad[0]!r}")


MERGE_GROUP = ConfigGroup("merge", MergeSpec, "reasonrl merge --config: method, models, knobs")


def load_spec(path: Path) -> MergeSpec:
    values = read_yaml(path)
    base = Path(path).parent  # relative checkpoint paths are relative to the YAML file
    for key in ("base", "output"):
        if isinstance(values.get(key), str):
            values[key] = str(base / values[key])
    if isinstance(values.get("experts"), list):
        values["experts"] = [str(base / e) if isinstance(e, str) else e for e in values["experts"]]
    try:
        return validate_group(MERGE_GROUP, values, prefix="")
    except ConfigError as error:  # keys read merge.<key>
        raise ConfigError(error.key.lstrip("."), str(error).split(": ", 1)[1]) from None


def run_spec(spec: MergeSpec, progress=None) -> Path:
    from reasonrl.plugins.merging.checkpoints import merge_checkpoints
    from reasonrl.plugins.merging.fusion import Average, Fusion, TaskArithmetic

    output = Path(spec.output)
    if spec.method == "average":
        rule = Average(tuple(float(w) for w in spec.weights) if spec.weights else None)
        return merge_checkpoints(Path(spec.experts[0]), [Path(e) for e in spec.experts[1:]], output, rule, progress)
    if spec.method == "fusion":
        rule = Fusion(spec.normalize, spec.drop_rate, spec.erase, spec.seed, spec.scale)
    else:
        rule = TaskArithmetic(spec.scale)
    return merge_checkpoints(Path(spec.base), [Path(e) for e in spec.experts], Path(spec.output), rule, progress)


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, required=True, help="merge YAML (method, base, experts, output, knobs)")


def _run(args: argparse.Namespace) -> int:
    start = time.monotonic()

    def progress(done: int, total: int) -> None:
        if done == total or done % max(1, total // 20) == 0:
            print(
                f"[reasonrl] merge: {done}/{total} tensors ({time.monotonic() - start:.1f} s)",
                file=sys.stderr,
                flush=True,
            )

    try:  # bad files and checkpoints raise UserError (MergeError is one) naming themselves
        spec = load_spec(args.config)
    except ConfigError as error:
        raise UserError(args.config, str(error)) from None
    output = run_spec(spec, progress)
    print(f"[reasonrl] merge: {spec.method} of {len(spec.experts)} checkpoint(s) written to {output}", flush=True)
    return 0


def _configure_pipeline(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        required=True,
        help="pipeline YAML (recipe, workdir, domains, overrides, fusion knobs); a CPU demo writes one: "
        "python -m benchmarks.merging.domain_parallel_demo DIR (from a checkout)",
    )


def _run_pipeline(args: argparse.Namespace) -> int:
    from reasonrl.plugins.merging.domain_parallel import load_spec, run

    config = args.config
    try:  # the spec and every RL run's config are checked before any stage starts
        spec = load_spec(config)
        table = run(spec, log=lambda line: print(f"[reasonrl] domain-parallel: {line}", flush=True))
    except (ConfigError, RuntimeError) as error:  # RuntimeError: an RL stage failed (its log is named)
        raise UserError(config, str(error)) from None
    except KeyboardInterrupt:
        print(f"[reasonrl] domain-parallel: interrupted; the same command resumes ({config})", flush=True)
        return 130
    print(f"domain-parallel evaluation: {json.dumps(table)}", flush=True)
    return 0


PIPELINE_COMMAND = CliCommand(
    "domain-parallel",
    "LongCat §3.4: expert RL per domain, fusion, general RL from the fused model; evaluation table + plot",
    _configure_pipeline,
    _run_pipeline,
)

MERGE_COMMAND = CliCommand(
    "merge", "merge Hugging Face checkpoints (LongCat fusion, averaging, task arithmetic)", _configure, _run
)
