"""Each built-in plugin lifted out alone (issue 43): a copy of the repository without every other
plugin's four folders (``plugins/``, ``patches/``, ``integration_tests/``, its option folders in
``hydra_configs/reasonrl/``) and entry point — keeping only the plugins it declares it needs —
installed editable in a fresh venv. There, every module of the plugin imports, ``reasonrl
plugins`` loads exactly the kept plugins with no error, and each of the plugin's options composes
over verl's own config (``~recipe``: the recipes combine several plugins) with knobs its schema
accepts.

Then the plugin's own unit tests (``plugins/<p>/tests``) run in the copy: this is where CI runs
them (``testpaths`` leaves ``plugins/`` out so that each runs once, with only its plugin and what it
declares installed). ``scripts/plugin_alone.py --unit-tests`` prints the same as a table."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from reasonrl.manager import call_each
from reasonrl.testing.plugin_alone import CHECK, install, lift_out

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent


def _declared() -> tuple[dict[str, list[str]], dict[str, set[str]]]:
    groups_of = {name: [] for name, _info in call_each("reasonrl_plugin_info") if name != "patches"}
    requires = {name: set(info.requires) for name, info in call_each("reasonrl_plugin_info")}
    for name, groups in call_each("reasonrl_config_groups"):
        groups_of[name] = [group.name for group in groups]
    return groups_of, requires


GROUPS_OF, REQUIRES = _declared()


def _recipe_groups() -> dict[str, set[str]]:
    """``recipe -> the option groups its defaults name``, following a recipe that extends another."""
    folder = REPO / "hydra_configs" / "recipe"
    texts = {path.stem: path.read_text() for path in folder.glob("*.yaml")}

    def groups(recipe: str) -> set[str]:
        named = set(re.findall(r"^  - optional /reasonrl/(\w+):", texts[recipe], re.M))
        for parent in re.findall(r"^  - (\w+)$", texts[recipe], re.M):
            named |= groups(parent) if parent in texts else set()
        return named

    return {recipe: groups(recipe) for recipe in texts}


@pytest.mark.parametrize("plugin", sorted(GROUPS_OF))
def test_the_plugin_lifted_out_alone_imports_loads_and_composes(plugin, tmp_path):
    keep = {plugin, *REQUIRES[plugin]}
    lift_out(REPO, tmp_path / "checkout", keep, GROUPS_OF)
    for other in set(GROUPS_OF) - keep:
        assert not (tmp_path / "checkout" / "plugins" / other).exists()
    python = install(tmp_path / "checkout", tmp_path / "venv")
    done = subprocess.run([str(python), "-c", CHECK, plugin], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["import_errors"] == {}, report["import_errors"]
    assert report["plugins"] == sorted(keep | {"patches"}), report["plugins"]
    assert report["load_errors"] == [], report["load_errors"]
    assert report["compose_errors"] == {}, report["compose_errors"]
    options = {p.stem for g in GROUPS_OF[plugin] for p in (REPO / "hydra_configs" / "reasonrl" / g).glob("*.yaml")}
    assert len(report["composed"]) == len(options), report["composed"]
    # a recipe naming an option of a plugin not there composes (optional defaults) but never runs
    kept_groups = {g for k in keep for g in GROUPS_OF.get(k, [])}
    refused = {recipe: groups - kept_groups for recipe, groups in _recipe_groups().items()}
    assert report["recipes_refused"] == {r: f"reasonrl/{min(g)}" for r, g in refused.items() if g}
    tests = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:randomly", f"plugins/{plugin}/tests"],
        capture_output=True,
        text=True,
        cwd=tmp_path / "checkout",
        timeout=540,
    )
    assert tests.returncode == 0, f"{plugin}'s unit tests alone:\n{tests.stdout[-6000:]}{tests.stderr[-2000:]}"
