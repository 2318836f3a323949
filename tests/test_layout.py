"""The repository layout the product promises, and the rules each plugin folder keeps."""

from __future__ import annotations

import ast
from pathlib import Path

from reasonrl.testing.fresh_process import python_fresh

REPO = Path(__file__).resolve().parent.parent
PLUGIN_DIRS = [p for p in (REPO / "plugins").iterdir() if (p / "__init__.py").exists()]
UPSTREAMS = ("verl", "vllm", "megatron", "ray")


def test_top_level_folders_exist():
    for name in ("plugins", "patches", "hydra_configs", "integration_tests", "docs", "pyproject.toml"):
        assert (REPO / name).exists(), name


def test_import_name_is_reasonrl_only(tmp_path):
    code = "import importlib.util as u, reasonrl.plugins, reasonrl.patches, reasonrl.hydra_configs; print(u.find_spec('plugins'), u.find_spec('patches'))"
    result = python_fresh(code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["None", "None"]


def test_each_plugin_folder_is_self_contained():
    for folder in PLUGIN_DIRS:
        assert (folder / "README.md").exists(), f"{folder.name}: README.md with the equation and knobs"
        assert list((folder / "tests").glob("test_*.py")), f"{folder.name}: tests/"
        for source in folder.rglob("*.py"):
            tree = ast.parse(source.read_text())
            for node in ast.walk(tree):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                for name in names:
                    other = name.startswith("reasonrl.plugins.") and not name.startswith(
                        f"reasonrl.plugins.{folder.name}"
                    )
                    assert not other, f"{source}: imports another plugin ({name})"


def test_upstream_imports_only_in_adapter_modules():
    """Plugin entry modules and cores import no upstream at module level; adapters may."""
    for folder in PLUGIN_DIRS:
        for source in [folder / "__init__.py", *folder.glob("core*.py")]:
            tree = ast.parse(source.read_text())
            for node in tree.body:
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                for name in names:
                    assert name.split(".")[0] not in UPSTREAMS, f"{source}: top-level import of {name}"


def test_no_benchmark_or_simulator_module_in_the_installed_packages():
    """Benchmarks and simulators live in benchmarks/ (run from a checkout), never in the wheel's folders."""
    patterns = ("bench*.py", "*_bench*.py", "simulat*.py", "sim_*.py")
    runner = "reasonrl/cli/bench_command.py"  # `reasonrl bench`: finds them in the checkout
    found = [
        name
        for folder in ("reasonrl", "plugins", "patches", "hydra_configs")
        for pattern in patterns
        for path in (REPO / folder).rglob(pattern)
        if "tests" not in path.relative_to(REPO).parts and (name := path.relative_to(REPO).as_posix()) != runner
    ]
    assert not found, f"move these to benchmarks/<plugin>/: {sorted(set(found))}"


def test_integration_tests_of_a_plugin_live_in_its_folder():
    """``integration_tests/<plugin>/`` holds a plugin's own integration tests (lifting a plugin out
    takes that folder); the root keeps the core's (recipes end to end, bridges, discovery)."""
    plugins = {folder.name for folder in PLUGIN_DIRS}
    shared = {"fixtures", "gpu_stack", "__pycache__"}
    folders = {p.name for p in (REPO / "integration_tests").iterdir() if p.is_dir()} - shared
    assert folders <= plugins, f"integration_tests/ folders that are no plugin: {sorted(folders - plugins)}"
    for test in (REPO / "integration_tests").glob("test_*.py"):
        stem = test.stem.removeprefix("test_")
        owner = [p for p in plugins if stem.startswith(p) or stem.startswith(p.rstrip("s") + "_")]
        assert not owner, f"{test.name} is plugin {owner[0]}'s: move it to integration_tests/{owner[0]}/"


# ------------------------------------------------------------------ the core knows no technique

#: Core modules that still import a plugin (directly or through a technique facade of
#: ``reasonrl.api``) or read a plugin's config key, with why. The list only shrinks: a module
#: that no longer needs its entry fails the test until the entry is removed (issue 43).
CORE_NAMING_A_TECHNIQUE = {
    "reasonrl/api.py": "the public facade re-exports the built-in plugins' functions explicitly (by design)",
}


def _plugin_config_prefixes() -> tuple[str, ...]:
    from reasonrl.config import config_groups

    return tuple(f"reasonrl.{name}." for name in config_groups())


def _names_a_technique(source: Path, prefixes: tuple[str, ...]) -> bool:
    tree = ast.parse(source.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(("reasonrl.plugins", "reasonrl.api")):
            return True
        if isinstance(node, ast.Import) and any(a.name.startswith("reasonrl.plugins") for a in node.names):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if any(prefix in node.value for prefix in prefixes):
                return True
    return False


def test_core_code_names_no_plugin_and_no_technique_config_key():
    prefixes = _plugin_config_prefixes()
    naming = {
        path.relative_to(REPO).as_posix()
        for path in (REPO / "reasonrl").rglob("*.py")
        if "testing" not in path.relative_to(REPO / "reasonrl").parts and _names_a_technique(path, prefixes)
    }
    assert naming - set(CORE_NAMING_A_TECHNIQUE) == set(), "core code now names a technique: move it to the plugin"
    assert set(CORE_NAMING_A_TECHNIQUE) - naming == set(), "no longer names a technique: drop it from the list"


def test_no_plugin_imports_the_cli_or_the_toy_assets():
    """Plugin code (its tests aside) imports neither the CLI nor the CPU smoke assets (``reasonrl.smoke``:
    the tiny model and arithmetic task of the CPU main job); demos on them live in ``benchmarks/``."""
    using_toys = set()
    for folder in PLUGIN_DIRS:
        for source in folder.rglob("*.py"):
            if "tests" in source.relative_to(folder).parts:
                continue
            for node in ast.walk(ast.parse(source.read_text())):
                module = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
                assert not module.startswith("reasonrl.cli"), f"{source}: imports the CLI ({module})"
                if module.startswith("reasonrl.smoke"):
                    using_toys.add(source.relative_to(REPO).as_posix())
    assert using_toys == set(), "plugin code builds on the smoke assets: move it to benchmarks/ or tests"
