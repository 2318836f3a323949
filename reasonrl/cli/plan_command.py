"""``reasonrl plan recipe=<r> [+preset=<p>] [key=value ...] [model=<config.json or folder>]``:
devices per role, the parallel layout and per-device bytes of weights, gradients and optimizer
state (reasonrl/planning.py), from the config ``reasonrl train`` would run and the model's config."""

from __future__ import annotations

import argparse

from reasonrl.contracts import CliCommand

MODEL_ARG = "model="


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "overrides",
        nargs="*",
        help="as for reasonrl train: recipe=<r> [+preset=<p>] [key=value ...]; model=<config.json or model folder> "
        "(default: actor_rollout_ref.model.path, if it holds a config.json or is in the Hugging Face cache)",
    )


def model_config_for(model: str | None, config) -> tuple[str, object]:
    """The model's transformers config: ``model=`` if given, else the run's model path, local or
    in the Hugging Face cache (no download)."""
    from reasonrl.errors import UserError
    from reasonrl.planning import load_model_config

    if model:
        return model, load_model_config(model)
    path = str(config.actor_rollout_ref.model.path)
    try:
        return path, load_model_config(path)
    except UserError:
        from transformers import AutoConfig

        try:
            return path, AutoConfig.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError) as error:
            raise UserError(
                "model=",
                f"{path} has no config.json here or in the Hugging Face cache ({type(error).__name__}); "
                f"give model=<config.json> (e.g. `hf download {path} config.json`)",
            ) from None


def compose_checked(overrides: list[str]):
    """The config ``reasonrl train`` would compose, its keys and knobs checked; a start-up check it
    fails (something ``reasonrl train`` refuses to run) is printed as a note, not an error: the
    plan still says what the layout needs."""
    import sys

    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from reasonrl.cli.train import compose_config
    from reasonrl.config import validate_config
    from reasonrl.errors import UserError
    from reasonrl.startup_checks import check_config, check_overrides, refuse_missing_options

    try:
        check_overrides(overrides, compose_config)
        config = compose_config(overrides)
        refuse_missing_options(overrides)
        validate_config(config)
    except (HydraException, OmegaConfBaseException) as error:
        raise UserError("config", str(error).strip()) from error
    try:
        check_config(config)
    except UserError as refusal:
        print(f"reasonrl plan: note: reasonrl train refuses this config: {refusal}", file=sys.stderr)
    return config


def _run(args: argparse.Namespace) -> int:
    from omegaconf import OmegaConf

    from reasonrl.errors import UserError
    from reasonrl.planning import format_plan, layout_of, model_shape, plan_roles

    overrides = [o for o in args.overrides if not o.startswith(MODEL_ARG)]
    model = next((o[len(MODEL_ARG) :] for o in args.overrides if o.startswith(MODEL_ARG)), None)
    if not any(o.startswith("recipe=") for o in overrides):
        raise UserError("recipe=", "name a recipe: reasonrl plan recipe=<mimo|kimi_k15|longcat|nemotron> [+preset=...]")
    config = compose_checked(overrides)
    name, model_config = model_config_for(model, config)
    model = model_shape(model_config)
    roles = plan_roles(model, layout_of(config))
    recipe = OmegaConf.select(config, "reasonrl.recipe.name", default="?")
    preset = OmegaConf.select(config, "reasonrl.preset.name", default="")
    print(format_plan(recipe, preset, name, model.parameters, roles))
    return 0


COMMAND = CliCommand(
    name="plan",
    help="devices, parallel layout and per-device memory of a recipe: reasonrl plan recipe=<r> [+preset=<p>] "
    "[model=<config.json>]",
    configure=_configure,
    run=_run,
)
