"""LongCat-Flash-Thinking §3.4 domain-parallel training: one RL run per domain from the same
starting model (each on its own data files), the fusion of the experts (:class:`Fusion`), then a
general RL run from the fused model — ``reasonrl domain-parallel --config pipeline.yaml``.

Every RL run is a ``reasonrl train`` process (verl + Ray + vLLM) in its own folder under
``workdir``; verl saves Hugging Face weights with each checkpoint (``hf_model``), which the
fusion reads. Stages are resumable: a finished stage leaves ``STAGE_DONE.json`` and is skipped
on the next launch; an interrupted RL stage resumes from its own last checkpoint (verl's
``resume_mode: auto``); the fusion writes its folder atomically. Finally every model (start,
experts, fused, general) is evaluated on every domain's validation questions (greedy vLLM
answers, the math reward): ``evaluation.json``, ``evaluation.md`` and ``evaluation.png``.

Before any stage runs, :func:`check_runs` composes every RL run's config still to run as
``reasonrl train`` will (recipe, overrides, data files) and validates it: a bad recipe or override
stops the command at once, named, instead of failing inside a child. Each child's Hydra run
folder is ``<stage folder>/hydra`` (never ``outputs/`` in the working directory).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

from reasonrl.child_process import run_through_ctrl_c
from reasonrl.config import ConfigError, knob, validate_group
from reasonrl.console import VERL_CONSOLE_ENV
from reasonrl.contracts import ConfigGroup
from reasonrl.plugins.merging.inputs import read_yaml

DONE = "STAGE_DONE.json"
#: the models of the evaluation: the starting model, every expert, the fused and the general model
MODEL_KINDS = ("start", "experts", "fused", "general")
HF_SAVE = "actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]"


@dataclasses.dataclass
class PipelineSpec:
    recipe: str = knob(help="the recipe of every RL run (LongCat: longcat)")
    workdir: str = knob(help="folder of the stages (relative: to the YAML's folder)")
    domains: dict = knob(
        help="name -> {train_files, val_files, overrides (optional: this expert's own, after expert_overrides)}: "
        "one expert RL run per domain"
    )
    general: dict | None = knob(None, help="{train_files, val_files} of the general RL run (default: every domain's)")
    overrides: list = knob([], help="overrides of every RL run (e.g. +preset=cpu_tiny)")
    expert_overrides: list = knob([], help="overrides of the expert runs (e.g. trainer.total_training_steps=...)")
    general_overrides: list = knob([], help="overrides of the general run")
    normalize: bool = knob(True, help="fusion: magnitude normalization across domains")
    drop_rate: float = knob(0.0, help="fusion: DARE drop probability", low=0.0, high=1.0, high_open=True)
    erase: bool = knob(True, help="fusion: majority-sign erasure")
    seed: int = knob(0, help="fusion: drop masks' seed")
    scale: float = knob(1.0, help="fusion: factor on the merged task vector")
    eval_questions: int = knob(64, help="validation questions per domain in the evaluation", low=1)
    eval_max_tokens: int = knob(32, help="answer budget in the evaluation", low=1)
    eval_models: list = knob(
        list(MODEL_KINDS), help=f"which models the evaluation covers, a subset of {list(MODEL_KINDS)}"
    )

    def check(self) -> None:
        if len(self.domains) < 2:
            raise ConfigError("domain_parallel.domains", f"needs at least 2 domains, got {sorted(self.domains)}")
        if not self.eval_models or not set(self.eval_models) <= set(MODEL_KINDS):
            raise ConfigError(
                "domain_parallel.eval_models", f"a non-empty subset of {list(MODEL_KINDS)}, got {self.eval_models}"
            )
        for name, files in self.domains.items():
            if not isinstance(files, dict) or not {"train_files", "val_files"} <= set(files):
                raise ConfigError(f"domain_parallel.domains.{name}", "needs train_files and val_files")
            unknown = set(files) - {"train_files", "val_files", "overrides"}
            if unknown:
                raise ConfigError(f"domain_parallel.domains.{name}", f"unknown key(s) {sorted(unknown)}")
            own = files.get("overrides", [])
            if not isinstance(own, list) or any(not isinstance(o, str) for o in own):
                raise ConfigError(
                    f"domain_parallel.domains.{name}.overrides", f"a list of strings key=value, got {own!r}"
                )
        if self.general is not None and not {"train_files", "val_files"} <= set(self.general):
            raise ConfigError("domain_parallel.general", "needs train_files and val_files (or leave it out)")
        for key in ("overrides", "expert_overrides", "general_overrides"):
            bad = [o for o in getattr(self, key) if not isinstance(o, str)]
            if bad:
                raise ConfigError(f"domain_parallel.{key}", f"a list of strings key=value, got {bad[0]!r}")


PIPELINE_GROUP = ConfigGroup("domain_parallel", PipelineSpec, "reasonrl domain-parallel --config")


def load_spec(path: Path) -> PipelineSpec:
    values = read_yaml(path)
    if isinstance(values.get("workdir"), str):
        values["workdir"] = str(Path(path).parent / values["workdir"])
    try:
        return validate_group(PIPELINE_GROUP, values, prefix="")
    except ConfigError as error:
        raise ConfigError(error.key.lstrip("."), str(error).split(": ", 1)[1]) from None


def _files(value) -> str:
    """A verl data-files override value: one path, or a list."""
    return json.dumps(value) if isinstance(value, list) else str(value)


def run_rl(spec: PipelineSpec, folder: Path, data: dict, extra: list[str], log) -> Path:
    """One RL stage (resumed by verl from its last checkpoint if interrupted): the Hugging Face
    weights of its last checkpoint."""
    done = folder / DONE
    if done.exists():
        log(f"{folder.name}: done, skipped")
        return Path(json.loads(done.read_text())["checkpoint"])
    folder.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "reasonrl.cli.main", "train", *train_overrides(spec, folder, data, extra)]
    log(f"{folder.name}: reasonrl train ... (log: {folder / 'train.log'})")
    with open(folder / "train.log", "a") as out:
        # train.log is the stage's whole log: verl's console output goes there too
        if run_through_ctrl_c(args, out, env={**os.environ, VERL_CONSOLE_ENV: "1"}) != 0:
            raise RuntimeError(f"{folder.name}: the RL run failed; see {folder / 'train.log'}")
    step = (folder / "latest_checkpointed_iteration.txt").read_text().strip()
    checkpoint = folder / f"global_step_{step}" / "actor" / "huggingface"
    done.write_text(json.dumps({"checkpoint": str(checkpoint), "step": int(step)}))
    return checkpoint


def expert_extra(spec: PipelineSpec, domain: str) -> list[str]:
    """An expert run's own overrides: every expert's, then its domain's (LongCat §3.4: each expert
    with its domain's settings — STEM 64K, code with the length curriculum, agentic 48K)."""
    return [*spec.expert_overrides, *spec.domains[domain].get("overrides", [])]


def general_data(spec: PipelineSpec) -> dict:
    """The general run's data: ``general``, or every domain's files."""
    return spec.general or {
        key: [
            f for files in spec.domains.values() for f in ([files[key]] if isinstance(files[key], str) else files[key])
        ]
        for key in ("train_files", "val_files")
    }


def general_extra(spec: PipelineSpec) -> list[str]:
    """The general run's own overrides: it starts from the fused model."""
    return [f"actor_rollout_ref.model.path={Path(spec.workdir) / 'fused'}", *spec.general_overrides]


def train_overrides(spec: PipelineSpec, folder: Path, data: dict, extra: list[str]) -> list[str]:
    """The ``reasonrl train`` arguments of one RL stage (Hydra's run folder inside the stage's)."""
    return [
        f"recipe={spec.recipe}", *spec.overrides, *extra,
        f"data.train_files={_files(data['train_files'])}", f"data.val_files={_files(data['val_files'])}",
        f"trainer.default_local_dir={folder}", HF_SAVE, f"hydra.run.dir={folder / 'hydra'}",
    ]  # fmt: skip


def _hydra_message(error: Exception) -> str:
    """Hydra's message on one line, without its search-path listing."""
    text = str(error).split("\nConfig search path:", 1)[0].strip()
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _compose_checked(overrides: list[str], key: str, what: str, validate: bool = True):
    """``reasonrl train``'s config for ``overrides`` (validated); else ConfigError(``key``)."""
    from hydra.errors import HydraException, MissingConfigException
    from omegaconf.errors import OmegaConfBaseException

    from reasonrl.composition import compose_config
    from reasonrl.config import validate_config
    from reasonrl.startup_checks import check_config, check_overrides, refuse_missing_options

    try:
        check_overrides(overrides, compose_config)  # reasonrl train's: a misspelt key named, not Hydra's hint
        config = compose_config(overrides)
        refuse_missing_options(overrides)
        if validate:
            validate_config(config)
            check_config(config)
    except ConfigError as error:
        raise ConfigError(key, f"the {what} config: {error}") from None
    except MissingConfigException as error:
        group, _, option = (error.missing_cfg_file or "").rpartition("/")
        if group and getattr(error, "options", None):
            raise ConfigError(key, f"{option!r} is not a {group}; allowed: {', '.join(error.options)}") from None
        raise ConfigError(key, f"the {what} config does not compose: {_hydra_message(error)}") from None
    except (HydraException, OmegaConfBaseException) as error:
        raise ConfigError(key, f"the {what} config does not compose: {_hydra_message(error)}") from None
    return config


def _local_files(value) -> list[str]:
    return [v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str) and "://" not in v]


def check_runs(spec: PipelineSpec) -> None:
    """Stop before any stage when an RL run still to do cannot start — the recipe unknown, an
    override that does not compose or validate, a data file missing — with a ConfigError naming
    the spec's key. Composing is in-process and writes nothing (a second or two per config)."""
    for name, files in spec.domains.items():
        for key in ("train_files", "val_files"):
            missing = [f for f in _local_files(files[key]) if not Path(f).exists()]
            if missing:
                raise ConfigError(f"domain_parallel.domains.{name}.{key}", f"{missing[0]}: no such file")
    for key in ("train_files", "val_files") if spec.general else ():
        missing = [f for f in _local_files(spec.general[key]) if not Path(f).exists()]
        if missing:
            raise ConfigError(f"domain_parallel.general.{key}", f"{missing[0]}: no such file")
    work = Path(spec.workdir)
    first_plain = next((name for name, files in spec.domains.items() if not files.get("overrides")), None)
    stages = []  # (the spec's key, what, stage folder, data, the stage's own overrides)
    for name, files in spec.domains.items():
        if files.get("overrides"):
            key, what = f"domains.{name}.overrides", f"{name} expert run's"
        elif name == first_plain:  # experts without overrides of their own differ only in data: one for all
            key, what = "expert_overrides", "expert runs'"
        else:
            continue
        stages.append((key, what, work / "experts" / name, files, expert_extra(spec, name)))
    stages.append(("general_overrides", "general run's", work / "general", general_data(spec), general_extra(spec)))
    stages = [stage for stage in stages if not (stage[2] / DONE).exists()]
    if not stages:
        return
    _compose_checked([f"recipe={spec.recipe}"], "domain_parallel.recipe", "recipe's", validate=False)
    _compose_checked(
        [f"recipe={spec.recipe}", *spec.overrides], "domain_parallel.overrides", "RL runs'", validate=False
    )
    for key, what, folder, data, extra in stages:
        try:
            _compose_checked(train_overrides(spec, folder, data, extra), f"domain_parallel.{key}", what)
        except ConfigError:  # the shared overrides at fault, or every expert's, or this stage's own
            _compose_checked([f"recipe={spec.recipe}", *spec.overrides], "domain_parallel.overrides", "RL runs'")
            if key.startswith("domains."):
                every = train_overrides(spec, folder, data, spec.expert_overrides)
                _compose_checked(every, "domain_parallel.expert_overrides", "expert runs'")
            raise


def starting_model(spec: PipelineSpec) -> Path:
    from reasonrl.composition import compose_config, resolve_in_driver

    config = compose_config([f"recipe={spec.recipe}", *spec.overrides])
    resolve_in_driver(config)
    return Path(config.actor_rollout_ref.model.path)


def run(spec: PipelineSpec, log=print) -> dict:
    from reasonrl.plugins.merging.checkpoints import merge_checkpoints
    from reasonrl.plugins.merging.fusion import Fusion

    check_runs(spec)
    work = Path(spec.workdir)
    fused = work / "fused"
    # the starting model is read from the composed config only where it is needed (a resumed
    # launch past the fusion that does not evaluate it skips composing it: seconds per launch)
    start = starting_model(spec) if not fused.exists() or "start" in spec.eval_models else None
    experts = {
        name: run_rl(spec, work / "experts" / name, files, expert_extra(spec, name), log)
        for name, files in spec.domains.items()
    }
    if not fused.exists():
        log(f"fusion of {sorted(experts)} into {fused}")
        merge_checkpoints(
            start,
            list(experts.values()),
            fused,
            Fusion(spec.normalize, spec.drop_rate, spec.erase, spec.seed, spec.scale),
        )
    general = run_rl(spec, work / "general", general_data(spec), general_extra(spec), log)
    every = {"start": {"start": start}, "experts": {f"expert:{n}": p for n, p in experts.items()},
             "fused": {"fused": fused}, "general": {"general": general}}  # fmt: skip
    models = {label: path for kind in MODEL_KINDS if kind in spec.eval_models for label, path in every[kind].items()}
    from reasonrl.plugins.merging.evaluate import evaluate_models

    table = evaluate_models(
        models,
        {n: f["val_files"] for n, f in spec.domains.items()},
        spec.eval_questions,
        spec.eval_max_tokens,
        work,
        log,
    )
    return table
