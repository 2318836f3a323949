"""Lift one built-in plugin out of the repository, as a maintainer taking it upstream would.

:func:`lift_out` copies the installable checkout (``reasonrl/``, ``plugins/``, ``patches/``,
``hydra_configs/``, ``integration_tests/``, ``benchmarks/``, ``setup.py``, ``pyproject.toml``) and
removes every other plugin's four folders — ``plugins/<q>/``, ``patches/<q>/``,
``integration_tests/<q>/`` and its option folders ``hydra_configs/reasonrl/<group>/`` — with its
``benchmarks/<q>/``, its entry point and its ``reasonrl.api`` re-exports, keeping the plugins
the one lifted out declares it needs (``PluginInfo.requires``). :func:`install` installs the copy
editable into a fresh venv that sees this environment's other packages but not its reasonrl, and
:data:`CHECK` is what ``python -c`` runs there: every module of the plugin imports, the plugin
manager loads exactly the kept plugins without errors, and each of the plugin's options composes
over verl's own config (no recipe: the recipes combine several plugins) with knobs its schema
accepts (the cross-field checks are left out: some need the recipe an option is written for, e.g.
the length curriculum's last stage equals the recipe's response length).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

SOURCES = (
    "reasonrl",
    "plugins",
    "patches",
    "hydra_configs",
    "integration_tests",
    "benchmarks",
    "setup.py",
    "pyproject.toml",
)
SKIP = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc", ".venv*")


def owned_folders(repo: Path, plugin: str, groups: list[str]) -> list[Path]:
    """The plugin's four folders (those that exist): its package, patches, integration tests and
    the option folder of each config group it declares — and its benchmarks (run from a checkout)."""
    folders = [repo / "plugins" / plugin, repo / "patches" / plugin, repo / "integration_tests" / plugin]
    folders += [repo / "benchmarks" / plugin]
    folders += [repo / "hydra_configs" / "reasonrl" / group for group in groups]
    return [folder for folder in folders if folder.exists()]


def lift_out(repo: Path, dest: Path, keep: set[str], groups_of: dict[str, list[str]]) -> None:
    """Copy ``repo``'s installable sources to ``dest`` with only the plugins in ``keep``."""
    dest.mkdir(parents=True)
    for name in SOURCES:
        source = repo / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=SKIP)
        else:
            shutil.copy2(source, dest / name)
    removed = sorted(set(groups_of) - keep)
    for plugin in removed:
        for folder in owned_folders(dest, plugin, groups_of[plugin]):
            shutil.rmtree(folder)
    _drop_reexports(dest / "reasonrl" / "api.py", set(removed))
    pyproject = dest / "pyproject.toml"
    lines = pyproject.read_text().splitlines(keepends=True)
    entry = re.compile(r'^(\w+) = "reasonrl\.plugins\.(\w+)"')
    pyproject.write_text("".join(line for line in lines if not ((m := entry.match(line)) and m.group(1) in removed)))


def _drop_reexports(api: Path, removed: set[str]) -> None:
    """``reasonrl.api`` less its explicit re-exports from the removed plugins (their import lines
    and ``__all__`` entries), as the entry points: they are not part of the core contract."""
    source = api.read_text()
    lines = source.splitlines(keepends=True)
    dropped_lines: set[int] = set()
    dropped_names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[:2] == ["reasonrl", "plugins"]:
            if node.module.split(".")[2] in removed:
                dropped_lines.update(range(node.lineno - 1, node.end_lineno))
                dropped_names.update(alias.asname or alias.name for alias in node.names)
    kept = [line for index, line in enumerate(lines) if index not in dropped_lines]
    kept = [line for line in kept if line.strip().rstrip(",").strip("\"'") not in dropped_names]
    api.write_text("".join(kept))


def _host_site_without_reasonrl(where: Path) -> Path:
    """This environment's site-packages as links, less reasonrl's own install (its finder, .pth,
    dist-info): the copy must discover its own entry points only."""
    site = Path(sysconfig.get_paths()["purelib"])
    where.mkdir(parents=True)
    for entry in site.iterdir():
        if "reasonrl" not in entry.name:
            (where / entry.name).symlink_to(entry)
    return where


def install(checkout: Path, venv: Path, hide_host_reasonrl: bool = True) -> Path:
    """``checkout`` installed editable (no dependencies) in a new venv over this environment's
    packages; returns the venv's python. ``hide_host_reasonrl``: the venv does not see this
    environment's own reasonrl install (its entry points would list plugins the copy lacks)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # after the copy's own site-packages (its editable finder) come this environment's packages
    host = _host_site_without_reasonrl(venv / "host-site") if hide_host_reasonrl else sysconfig.get_paths()["purelib"]
    Path(purelib, "zz_host_environment.pth").write_text(f"{host}\n")
    command = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps"]
    command += ["--no-build-isolation", "--no-index", "-e", str(checkout)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"editable install of {checkout} failed:\n{done.stdout}{done.stderr}")
    return python


#: run in the copy's venv as ``python -c CHECK <plugin>``; prints one JSON line
CHECK = r"""
import importlib, json, pkgutil, sys
plugin = sys.argv[1]
report = {"import_errors": {}, "composed": [], "compose_errors": {}}
import verl  # first, as in every verl process: the bridge registers the adapters (importing one first races it)
package = importlib.import_module(f"reasonrl.plugins.{plugin}")
for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
    if ".tests" in module.name:
        continue
    try:
        importlib.import_module(module.name)
    except ModuleNotFoundError as exc:  # an optional upstream of another environment (NeMo's) is fine
        if (exc.name or "").startswith("reasonrl"):
            report["import_errors"][module.name] = f"{type(exc).__name__}: {exc}"
    except Exception as exc:
        report["import_errors"][module.name] = f"{type(exc).__name__}: {exc}"
from reasonrl.cli.plugins_command import collect_report
plugins = collect_report()
report["plugins"] = sorted(plugins["plugins"])
report["load_errors"] = [f"{e['plugin']}: {e['where']}: {e['error']}" for e in plugins["errors"]]
from omegaconf import OmegaConf
from reasonrl.composition import compose_config
from reasonrl.config import config_groups, validate_reasonrl_section
from reasonrl.manager import call_each
import reasonrl.hydra_configs as configs
from pathlib import Path
root = Path(configs.__file__).parent / "reasonrl"
mine = [g.name for p, gs in call_each("reasonrl_config_groups") if p == plugin for g in gs]
for group in mine:
    for option in sorted(p.stem for p in (root / group).glob("*.yaml")):
        override = f"+reasonrl/{group}={option}"
        try:
            config = compose_config(["~recipe", override])  # the knobs' schema; cross-field checks need a recipe
            validate_reasonrl_section(OmegaConf.to_container(config.reasonrl, resolve=True), config_groups())
            report["composed"].append(override)
        except Exception as exc:
            report["compose_errors"][override] = f"{type(exc).__name__}: {exc}"
from reasonrl.config import ConfigError
from reasonrl.startup_checks import refuse_missing_options
report["recipes_refused"] = {}  # recipe -> the first group its run is refused for (a plugin not there)
for recipe in sorted(p.stem for p in (Path(configs.__file__).parent / "recipe").glob("*.yaml")):
    try:
        refuse_missing_options([f"recipe={recipe}"])
    except ConfigError as exc:
        report["recipes_refused"][recipe] = exc.key
print(json.dumps(report))
"""
