"""``reasonrl train recipe=<name> [overrides]``: verl's trainer with a reasonrl recipe.

The arguments are Hydra's (overrides, ``--cfg job``, ``--help``, ``-m``). Before Hydra runs,
the config is composed once and validated (``reasonrl.*`` keys, plugin checks), so a bad
value fails before any work starts — also with ``--cfg job``. The run itself is verl's own
``verl.trainer.main_ppo.main`` body on the composed config. Recipes that need per-step plugin
callbacks select verl trainer mode ``reasonrl_sync`` (verl's ``PPOTrainerSync`` plus a thin
subclass, ``bridges/verl_trainer_classes.py``) — all four shipped recipes do; a config without
such callbacks runs verl's own ``sync`` mode unchanged.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from reasonrl.composition import (  # noqa: F401  (train's composer; tests and tools import it from here too)
    CONFIG_MODULE,
    CONFIG_NAME,
    VERL_CONFIG_SEARCHPATH,
    compose_config,
    export_runtime_env,
    plugin_searchpath,
    resolve_in_driver,
    with_searchpath,
)
from reasonrl.contracts import CliCommand
from reasonrl.errors import USER_ERROR_EXIT, UserError, debug_enabled, user_error_line


class UpstreamOutOfRange(RuntimeError):
    """A piece of reasonrl the run needs reaches an upstream internal on a version it was not written for."""


def check_upstream_versions(config: Any) -> None:
    """Stop before any work when the run needs a reasonrl piece that reaches into an upstream
    version outside the range it was written for (``reasonrl.compat``): one line per piece.
    ``REASONRL_ALLOW_UNTESTED_UPSTREAM=1`` prints the lines and goes on."""
    from reasonrl.compat import ALLOW_ENV, startup_problems

    problems = startup_problems(config)
    if not problems:
        return
    if os.environ.get(ALLOW_ENV) == "1":
        print("\n".join(f"{line} ({ALLOW_ENV}=1: going on)" for line in problems), file=sys.stderr, flush=True)
        return
    raise UpstreamOutOfRange(
        "\n".join(problems) + f"\nInstall versions in those ranges, or set {ALLOW_ENV}=1 to try anyway."
    )


def check_verl_bridge() -> None:
    """Import verl and make sure reasonrl's bridge ran and every plugin loaded."""
    import verl  # noqa: F401  (runs the verl.plugins entry points, ours included)

    from reasonrl.bridges import STATUS
    from reasonrl.manager import load_errors

    if not STATUS["verl"].ran:
        raise RuntimeError(
            "reasonrl's verl bridge did not run during `import verl`. Check that reasonrl is installed "
            "in this environment and that VERL_USE_EXTERNAL_PLUGINS allows 'reasonrl' "
            f"(now {os.environ.get('VERL_USE_EXTERNAL_PLUGINS', 'auto')!r})."
        )
    errors = load_errors()
    if errors and os.environ.get("REASONRL_ALLOW_PLUGIN_ERRORS") != "1":
        lines = "\n".join(f"  - {e.plugin} ({e.where}): {e.error}" for e in errors)
        raise RuntimeError(
            f"{len(errors)} reasonrl plugin failure(s); a run would silently lack them:\n{lines}\n"
            "Fix or uninstall the plugin, or set REASONRL_ALLOW_PLUGIN_ERRORS=1 to run anyway."
        )


def run_prepare_step(config: Any) -> None:
    """Call the preset's ``reasonrl.preset.prepare`` (``module:function``), if it names one."""
    from importlib import import_module

    from omegaconf import OmegaConf

    target = OmegaConf.select(config, "reasonrl.preset.prepare")
    if target:
        module, _, function = str(target).partition(":")
        getattr(import_module(module), function)(config)


def launch_name() -> str:
    """This launch's name, ``<time>-<pid>``, shared by its metrics file, config and start-up record."""
    global _LAUNCH_NAME
    if _LAUNCH_NAME is None:
        _LAUNCH_NAME = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    return _LAUNCH_NAME


_LAUNCH_NAME: str | None = None


def pin_run_paths(config: Any) -> Path | None:
    """Make the run folder absolute (Ray workers do not share the driver's cwd) and give this
    launch its own metrics file: verl's file logger truncates its file when it opens it, so
    a resumed run would otherwise lose the steps before the resume. Returns that file."""
    from omegaconf import OmegaConf, open_dict

    run_dir = os.path.abspath(os.path.expanduser(str(config.trainer.default_local_dir)))
    loggers = config.trainer.logger
    loggers = [loggers] if isinstance(loggers, str) else list(loggers or [])
    with open_dict(config):
        config.trainer.default_local_dir = run_dir
        if "file" not in loggers:
            return None
        path = os.environ.get("VERL_FILE_LOGGER_PATH") or os.path.join(run_dir, "metrics", launch_name() + ".jsonl")
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        # force_add: a preset without runtime_env.env_vars gets them (a setdefault on a DictConfig
        # returns a copy, so the path was silently not passed to the Ray workers)
        env_var = "ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH"
        OmegaConf.update(config, env_var, os.path.abspath(path), force_add=True)
    return Path(path)


def run_dir_of(config: Any) -> Path:
    return Path(config.trainer.default_local_dir)


def save_launch_config(config: Any) -> Path:
    """This launch's composed, resolved config in the run folder (``configs/<time>-<pid>.yaml``,
    as Hydra would keep it in its output folder): what each launch of a resumed run trained with."""
    from omegaconf import OmegaConf

    path = run_dir_of(config) / "configs" / (launch_name() + ".yaml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(OmegaConf.to_yaml(config))
    return path


def check_run_inputs(config: Any) -> None:
    """The config's checks (also for library callers of :func:`run_training`) and the files the
    run reads (model folder, dataset columns), after the preset has made its assets; raise
    :class:`UserError` naming the key or file."""
    from reasonrl.startup_checks import check_config, check_inputs

    check_config(config)  # a ConfigError is a UserError: named, exit 2
    check_inputs(config)


#: the summary's outcome of a launch stopped by Ctrl-C or SIGTERM
INTERRUPTED = "interrupted (the same command resumes from the last checkpoint)"
INTERRUPTED_BY_SIGTERM = "interrupted by SIGTERM (the same command resumes from the last checkpoint)"
#: exit code of a launch stopped by SIGTERM: 128 + 15, as shells, Slurm and Kubernetes report a
#: process SIGTERM ended (Ctrl-C gives 130, ``reasonrl.cli.main``)
SIGTERM_EXIT = 143


class SigtermAsCtrlC:
    """SIGTERM (``kill``, a scheduler's preemption) ends a launch as Ctrl-C does: a
    KeyboardInterrupt in the driver's main thread, so verl and Ray unwind and shut down the
    same way, and the summary says "interrupted".

    ``ray.init`` (called by verl's ``main`` body) installs Ray's own driver handler, whose
    ``sys.exit(15)`` Ray turns into ``SystemExit(1)`` inside ``ray.get`` (and the process then
    aborted in a CPU run): while this is active, ``ray.init`` is wrapped to put this handler back
    once Ray has started (``ray.init`` is Ray's public API; verl 0.9 calls it through the ``ray``
    module). A SIGTERM during ``ray.init`` itself meets Ray's handler: its ``SystemExit(15)`` counts
    as the same stop. After the first SIGTERM, further ones are ignored so they cannot cut the
    summary or Ray's shutdown at exit short (a scheduler's SIGKILL after its grace period still
    ends everything)."""

    def __init__(self) -> None:
        self.received = False
        self._installed = False
        self._previous: Any = None
        self._ray: Any = None
        self._ray_init: Any = None

    def __enter__(self) -> "SigtermAsCtrlC":
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
            self._installed = True
            self._wrap_ray_init()
        return self

    def _wrap_ray_init(self) -> None:
        import functools
        import signal
        import threading

        try:
            import ray
        except ImportError:
            return
        self._ray, self._ray_init = ray, ray.init

        @functools.wraps(ray.init)
        def init(*args: Any, **kwargs: Any) -> Any:
            try:
                return self._ray_init(*args, **kwargs)
            finally:
                if threading.current_thread() is threading.main_thread():
                    signal.signal(signal.SIGTERM, self._handle)

        ray.init = init

    def _handle(self, signum: int, frame: Any) -> None:
        if not self.received:
            self.received = True
            raise KeyboardInterrupt

    def stopped(self, error: BaseException) -> bool:
        """Whether ``error`` ends the launch because of SIGTERM (ours, or Ray's handler's exit)."""
        import signal

        if not self.received and isinstance(error, SystemExit) and error.code == signal.SIGTERM:
            self.received = True
            if self._installed:  # ours again, over Ray's: a second SIGTERM is ignored
                signal.signal(signal.SIGTERM, self._handle)
        return self.received

    def __exit__(self, *exc_info: Any) -> None:
        import signal

        if self._ray is not None:
            self._ray.init = self._ray_init
        if self._installed and not self.received:
            signal.signal(signal.SIGTERM, self._previous)


def run_training(config: Any) -> None:
    """Validate, load the plugins, and hand the config to verl's own trainer entry point.

    With verl's ``file`` logger on, a progress line per step and a final summary are printed
    (``reasonrl.progress``); they read what verl logged. Before anything is built the run
    folder must be writable and the checkpoint a resume starts from intact
    (``reasonrl.checkpoints``). SIGTERM stops the launch as Ctrl-C does, with exit code 143.
    """
    from reasonrl import startup_clock
    from reasonrl.checkpoints import prepare_run_folder
    from reasonrl.config import validate_config
    from reasonrl.console import QuietConsole, launch_log_path, verl_console
    from reasonrl.progress import ProgressDisplay, summary_lines

    startup_clock.mark("Hydra composed the config")
    with SigtermAsCtrlC() as sigterm, startup_clock.marks_ray_start():
        try:
            validate_config(config)
            check_upstream_versions(config)
            prepare_run_folder(config)  # seconds, before the preset's assets and Ray
            run_prepare_step(config)
            startup_clock.mark("run folder checked, preset's assets")
            metrics_path = pin_run_paths(config)
            export_runtime_env(config)
            startup_clock.start_record(run_dir_of(config) / "startup" / (launch_name() + ".jsonl"), config)
            resolve_in_driver(config)
            save_launch_config(config)
            check_run_inputs(config)
            startup_clock.mark("config resolved, inputs checked")
            check_verl_bridge()
            startup_clock.mark("verl's bridge checked (import verl)")
            from reasonrl.compat.verl import run_main_ppo

            if metrics_path is None:
                run_main_ppo(config)
                return
            outcome, cause = "failed", None
            display = ProgressDisplay(metrics_path, total_steps=config.trainer.total_training_steps or 0)
            run_dir = Path(config.trainer.default_local_dir)
            console = None if verl_console() else QuietConsole(launch_log_path(run_dir))
            try:
                with console or contextlib.nullcontext():
                    display.out = console.terminal if console else sys.stderr
                    with display:
                        # verl's `main` body (device selection, verl's own validation, Ray start,
                        # TaskRunner) without a second Hydra run.
                        run_main_ppo(config)
                outcome = "finished"
            except BaseException as error:
                if sigterm.stopped(error):
                    outcome = INTERRUPTED_BY_SIGTERM
                elif isinstance(error, KeyboardInterrupt):
                    outcome = INTERRUPTED
                else:
                    from reasonrl.failures import ray_failure

                    cause = ray_failure(error)
                raise
            finally:
                lines = summary_lines(display.record, run_dir, outcome)
                startup = startup_clock.summary_line(startup_clock.record_path())
                lines[-2:-2] = [startup] if startup else []  # before the checkpoint and plot lines
                if cause:
                    lines.insert(1, f"  cause             {cause}")
                if console is not None:
                    if outcome == "failed":
                        lines += ["  errors in the log (last lines):", *(f"    {x}" for x in console.error_lines())]
                    lines.append(f"  log               {console.log}")
                print("\n".join(lines), file=sys.stderr, flush=True)
        except BaseException as error:
            if not sigterm.stopped(error):
                raise
            print("reasonrl: interrupted (SIGTERM)", file=sys.stderr, flush=True)
            raise SystemExit(SIGTERM_EXIT) from None


def _hydra_app() -> None:
    import hydra

    from reasonrl.config import register_resolvers

    register_resolvers()

    @hydra.main(config_path=f"pkg://{CONFIG_MODULE}", config_name=CONFIG_NAME, version_base=None)
    def app(config: Any) -> None:
        try:
            run_training(config)
        except UserError as error:  # one line and exit 2, not Hydra's report of a traceback
            if debug_enabled():
                raise
            print(user_error_line("train", error), file=sys.stderr, flush=True)
            sys.exit(USER_ERROR_EXIT)

    app()


def _options(group: str) -> list[str]:
    from importlib.resources import files

    folder = files(CONFIG_MODULE) / group
    return sorted(entry.name[: -len(".yaml")] for entry in folder.iterdir() if entry.name.endswith(".yaml"))


def _plugin_options() -> dict[str, list[str]]:
    """Each plugin option group under ``hydra_configs/reasonrl/`` and its options."""
    from importlib.resources import files

    folder = files(CONFIG_MODULE) / "reasonrl"
    return {
        entry.name: _options(f"reasonrl/{entry.name}")
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.is_dir() and not entry.name.startswith(("_", "."))
    }


def usage() -> str:
    """``reasonrl train --help`` without a recipe (Hydra's own help needs one to compose)."""
    from reasonrl.config import config_groups

    groups = ", ".join(f"reasonrl.{name}" for name in sorted(config_groups())) or "none installed"
    installed = {group: names for group, names in _plugin_options().items() if names}
    options = [f"    +reasonrl/{group}={'|'.join(names)}" for group, names in installed.items()]
    # an example option from what is installed: the core names no plugin's option itself
    examples = [f"  reasonrl train recipe=longcat +preset=cpu_tiny +reasonrl/{group}={names[0]} trainer.total_training_steps=5"
                for group, names in list(installed.items())[:1]]  # fmt: skip
    return "\n".join(
        [
            "reasonrl train: run verl's PPO/GRPO trainer with a reasonrl recipe.",
            "",
            "Usage: reasonrl train recipe=<name> [+preset=<name>] [+reasonrl/<group>=<option> ...] [key=value ...]",
            "                      [--cfg job [--resolve]] [-m]",
            f"  recipe=             {', '.join(_options('recipe'))}",
            f"  +preset=            {', '.join(_options('preset'))} (a '+': presets are not in the recipes' defaults)",
            "  +reasonrl/<group>=<option>   turn a plugin option on (a '+': the group is added to the config;",
            "                      without it Hydra answers 'Could not find ... in the defaults list'):",
            *options,
            "  reasonrl.<group>.<knob>=<value>   set one knob of a group the recipe or an option already has",
            "                      (+reasonrl.<group>.<knob>=<value> when neither has the group);",
            f"                      groups: {groups}; knobs and ranges: reasonrl plugins",
            "  <verl key>=<value>  any verl key by its verl name, e.g. data.train_batch_size=8; a key that is",
            "                      neither verl's nor the recipe's is refused, naming it (with or without '+')",
            "",
            "Examples:",
            "  reasonrl train recipe=mimo +preset=cpu_tiny                          # the CPU main job",
            *examples,
            "  reasonrl train recipe=kimi_k15_long2short actor_rollout_ref.model.path=/ckpt/long_cot",
            "",
            "Print the merged config without running:  reasonrl train recipe=mimo --cfg job",
            "Hydra's full help for a recipe (all groups): reasonrl train recipe=mimo --help",
            "verl's own console output (instead of one line per step): REASONRL_VERL_CONSOLE=1 reasonrl train ...",
        ]
    )


def precheck(overrides: list[str]) -> Any:
    """Compose and check the run config from the command line before anything runs (also for
    ``--cfg job``); raise :class:`UserError` naming the key. Returns the config."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from reasonrl.config import validate_config
    from reasonrl.startup_checks import check_config, check_overrides, refuse_missing_options

    try:
        check_overrides(overrides, compose_config)  # first: a misspelt key is named, not Hydra's hint
        config = compose_config(overrides)
        refuse_missing_options(overrides)
        validate_config(config)
        check_config(config)
    except (HydraException, OmegaConfBaseException) as error:
        raise UserError("config", str(error).strip()) from error
    check_upstream_versions(config)  # UpstreamOutOfRange: one "reasonrl: [reach] ..." line per piece
    return config


def _skips_precheck(args: argparse.Namespace) -> bool:
    return bool(args.help or args.hydra_help or args.info or args.shell_completion or args.multirun)


def main(argv: list[str]) -> int:
    """Entry for ``reasonrl train``; returns the process exit code."""
    from reasonrl import startup_clock
    from reasonrl.compat.hydra import hydra_args_parser  # Hydra's own CLI grammar

    startup_clock.mark("Python, reasonrl imported")
    args = hydra_args_parser().parse_args(argv)
    if args.help and not any(o.startswith("recipe=") for o in args.overrides):
        print(usage())
        return 0
    if not _skips_precheck(args):
        try:
            config = precheck(args.overrides)
            startup_clock.mark("config composed and checked")
            if not args.cfg:  # a launch: Hydra makes its folder inside the run folder first
                from reasonrl.checkpoints import check_writable

                check_writable(os.path.abspath(os.path.expanduser(str(config.trainer.default_local_dir))))
        except UpstreamOutOfRange as error:
            print(error, file=sys.stderr)
            return USER_ERROR_EXIT
        except UserError as error:
            print(user_error_line("train", error), file=sys.stderr)
            return USER_ERROR_EXIT
    # Hydra's parser wants flags first, then all overrides (its positional list).
    flags = list(argv)
    for override in args.overrides:
        flags.remove(override)
    sys.argv = ["reasonrl train", *flags, *with_searchpath(args.overrides)]
    _hydra_app()
    return 0


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "overrides", nargs="*", help="Hydra overrides, e.g. recipe=mimo +preset=cpu_tiny; see `reasonrl train --help`"
    )


def _run(args: argparse.Namespace) -> int:  # only reached through build_parser, e.g. in tests
    return main(list(args.overrides))


COMMAND = CliCommand(
    name="train",
    help="run verl's trainer with a recipe: reasonrl train recipe=<mimo|kimi_k15|longcat|nemotron> [overrides] [--cfg job]",
    configure=_configure,
    run=_run,
)
