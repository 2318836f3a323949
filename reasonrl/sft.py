"""``reasonrl sft``: an SFT recipe on verl's own SFT trainer (``verl.trainer.sft_trainer``), under
torchrun — the cold-start stage whose output the RL recipe starts from.

Compose (``reasonrl_sft_trainer.yaml`` over verl's ``sft_trainer_engine``), run the preset's
prepare step, check before any process starts (the ``reasonrl`` knobs, verl's own config
dataclasses, the data files, a Hugging Face model among what is saved), save the resolved config
in the run folder, then torchrun this module's worker: a plugin's SFT trainer where the plugin's
knobs ask for one (hook ``reasonrl_sft_trainer``, e.g. MTP), else verl's ``run_sft``. verl resumes
from the run folder's last checkpoint (``trainer.resume_mode: auto``). The last checkpoint's
Hugging Face model is written to ``sft_output.json`` and printed as the RL recipe's
``actor_rollout_ref.model.path``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from reasonrl.errors import UserError

SFT_CONFIG_NAME = "reasonrl_sft_trainer"
OUTPUT_FILE = "sft_output.json"
CONFIG_FILE = "sft_config.yaml"
#: what the user types → the SFT config's own groups (the RL config owns `recipe` and `preset`)
GROUP_ALIASES = {"recipe": "sft_recipe", "+preset": "+sft_preset", "preset": "sft_preset"}


def sft_overrides(overrides: list[str]) -> list[str]:
    """``recipe=X`` / ``+preset=Y`` as the SFT config's groups ``sft_recipe`` / ``sft_preset``."""
    renamed = []
    for override in overrides:
        key, sep, value = override.partition("=")
        renamed.append(f"{GROUP_ALIASES[key]}={value}" if sep and key in GROUP_ALIASES else override)
    return renamed


def compose_sft_config(overrides: list[str]) -> Any:
    """The SFT config ``reasonrl sft`` would run (``overrides`` as the user types them)."""
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException

    from reasonrl.composition import CONFIG_MODULE
    from reasonrl.config import register_resolvers

    register_resolvers()
    try:
        with initialize_config_module(CONFIG_MODULE, version_base=None):
            return compose(SFT_CONFIG_NAME, overrides=sft_overrides(overrides))
    except HydraException as error:
        raise UserError(
            "overrides", str(error).replace("sft_recipe", "recipe").replace("sft_preset", "preset")
        ) from None


def check_sft_config(config: Any) -> None:
    """Everything that can be checked before torchrun starts; a problem raises :class:`UserError`
    naming its key or file."""
    from omegaconf import OmegaConf

    from reasonrl.config import config_groups, validate_reasonrl_section

    if not OmegaConf.select(config, "reasonrl.recipe.name"):
        raise UserError("recipe", "no SFT recipe chosen: reasonrl sft recipe=<mimo_sft|nemotron_sft|longcat_sft>")
    if not OmegaConf.select(config, "model.path"):
        raise UserError(
            "model.path", "the recipe's base model has no public checkpoint: give its path (model.path=...)"
        )
    validate_reasonrl_section(OmegaConf.to_container(config.reasonrl, resolve=True), config_groups())
    check_verl_sections(config)
    for key in ("data.train_files", "data.val_files"):
        value = OmegaConf.select(config, key)
        for path in [value] if isinstance(value, str) else list(value or []):
            if not Path(os.path.expanduser(path)).exists():
                raise UserError(key, f"{path} does not exist")
    if int(config.trainer.nnodes) != 1:
        raise UserError(
            "trainer.nnodes",
            "reasonrl sft starts one node; on several, torchrun `-m reasonrl.sft <saved config>` on each",
        )


def check_verl_sections(config: Any) -> None:
    """verl's own validation of the SFT config (``SFTTrainer._build_config``'s dataclasses; the
    model's needs its checkpoint and runs in the workers), and a Hugging Face model among what is
    saved (the RL recipe starts from it)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException
    from verl.utils.config import omega_conf_to_dataclass

    for key in ("engine", "optim", "checkpoint", "profiler"):
        try:
            omega_conf_to_dataclass(config[key])
        except (HydraException, OmegaConfBaseException, TypeError, ValueError, AssertionError) as error:
            cause = error.__cause__ or error  # hydra wraps the dataclass's own complaint
            raise UserError(key, f"verl refuses it: {type(cause).__name__} {cause}".strip()) from None
    if "hf_model" not in list(config.checkpoint.save_contents):
        raise UserError(
            "checkpoint.save_contents", "add hf_model: the RL recipe starts from the SFT run's Hugging Face model"
        )


def run_folder(config: Any) -> Path:
    return Path(os.path.expanduser(str(config.trainer.default_local_dir)))


def save_config(config: Any) -> Path:
    """The resolved config in the run folder: what the workers read, and a record of the run."""
    from omegaconf import OmegaConf

    folder = run_folder(config)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / CONFIG_FILE
    OmegaConf.save(OmegaConf.to_container(config, resolve=True), path)
    return path


def torchrun_command(config: Any, config_path: Path) -> list[str]:
    torchrun = Path(sys.executable).parent / "torchrun"
    return [
        str(torchrun) if torchrun.exists() else "torchrun",
        "--standalone",
        "--nproc_per_node",
        str(int(config.trainer.n_gpus_per_node)),
        "-m",
        "reasonrl.sft",
        str(config_path),
    ]


def hf_output(folder: Path) -> Path | None:
    """The Hugging Face model of the run folder's newest checkpoint (None: none saved yet)."""
    steps = sorted(
        (int(match.group(1)), path)
        for path in folder.glob("global_step_*")
        if (match := re.fullmatch(r"global_step_(\d+)", path.name)) and (path / "huggingface").is_dir()
    )
    for _step, path in reversed(steps):
        model = path / "huggingface"
        if any(model.glob("*.safetensors")) or any(model.glob("*.bin")):
            return model
    return None


def run_sft(config: Any) -> Path:
    """Check, launch the workers, and return the Hugging Face model the run ends with."""
    from reasonrl.child_process import run_through_ctrl_c
    from reasonrl.cli.train import run_prepare_step

    run_prepare_step(config)
    check_sft_config(config)
    config_path = save_config(config)
    env = dict(os.environ)
    if str(config.trainer.device) == "cpu":
        env["VERL_PLATFORM"] = "cpu"
    command = torchrun_command(config, config_path)
    print(f"reasonrl sft: {' '.join(command)}", file=sys.stderr, flush=True)
    code = run_through_ctrl_c(command, None, env=env)  # Ctrl-C: torchrun stops its workers, then we do
    if code != 0:
        raise SystemExit(code)
    folder = run_folder(config)
    model = hf_output(folder)
    if model is None:
        raise UserError(str(folder), "the SFT run ended without a Hugging Face model (checkpoint.save_contents)")
    record = {"hf_model": str(model.resolve()), "recipe": str(config.reasonrl.recipe.name)}
    record["rl_recipe"] = str(config.reasonrl.recipe.get("rl_recipe") or "")
    (folder / OUTPUT_FILE).write_text(json.dumps(record, indent=1) + "\n")
    print(
        f"reasonrl sft: done; the RL recipe starts from it: reasonrl train recipe={record['rl_recipe'] or '<recipe>'} "
        f"actor_rollout_ref.model.path={record['hf_model']}",
        file=sys.stderr,
        flush=True,
    )
    return model


def run_worker(config_path: str) -> None:
    """One torchrun worker: a plugin's SFT trainer for its knobs, else verl's ``run_sft``."""
    from omegaconf import OmegaConf
    from verl.utils.device import auto_set_device

    from reasonrl.manager import get_plugin_manager

    config = OmegaConf.load(config_path)
    auto_set_device(config)
    trainer = get_plugin_manager().hook.reasonrl_sft_trainer(config=config)
    if trainer is None:
        from verl.trainer.sft_trainer import run_sft as trainer
    trainer(config)


if __name__ == "__main__":
    run_worker(sys.argv[1])
