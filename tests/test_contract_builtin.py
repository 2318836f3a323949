"""The public contract suite (``pytest --pyargs reasonrl.testing``) on the installed plugins:
in this repository's environment, the built-in ones."""

from reasonrl.testing.test_installed_plugins import (  # noqa: F401  (collected by pytest)
    PLUGINS,
    test_declarations_keep_the_contract,
    test_plugin_module_imports_no_upstream,
    test_verl_registrations_apply_twice,
)


def test_every_builtin_plugin_folder_is_an_installed_plugin():
    from pathlib import Path

    folders = {
        p.name for p in (Path(__file__).resolve().parent.parent / "plugins").iterdir() if (p / "__init__.py").exists()
    }
    installed = {
        module.removeprefix("reasonrl.plugins.") for _name, module in PLUGINS if module.startswith("reasonrl.plugins.")
    }
    assert folders == installed, (
        "add each plugins/<name> to [project.entry-points.'reasonrl.plugins'] in pyproject.toml"
    )
