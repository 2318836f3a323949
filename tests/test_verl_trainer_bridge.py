"""reasonrl's verl trainer mode: registered right after verl's trainer package is imported,
in whichever process imports it, and its callbacks come from the plugins."""

from __future__ import annotations

import sys

from reasonrl.bridges.import_hooks import _AfterImport, run_after_import
from reasonrl.bridges.verl_trainer import build_callbacks
from reasonrl.contracts import TrainerCallback


def test_callback_runs_once_right_after_the_module_is_imported(tmp_path, monkeypatch):
    package = tmp_path / "reasonrl_probe_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "late.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    hook = _AfterImport("reasonrl_probe_pkg.late", lambda: seen.append(sys.modules["reasonrl_probe_pkg.late"].VALUE))
    sys.meta_path.insert(0, hook)
    try:
        import reasonrl_probe_pkg.late  # noqa: F401

        assert seen == [42], "after the module body ran"
        assert hook not in sys.meta_path, "it steps aside after one use"
    finally:
        if hook in sys.meta_path:
            sys.meta_path.remove(hook)
        for name in ("reasonrl_probe_pkg.late", "reasonrl_probe_pkg"):
            sys.modules.pop(name, None)


def test_run_after_import_calls_now_when_already_imported_and_installs_one_hook_per_module():
    calls = []
    run_after_import("json", lambda: calls.append("now"))  # imported long ago
    assert calls == ["now"]
    name = "reasonrl_probe_never_imported"
    run_after_import(name, lambda: calls.append("later"))
    run_after_import(name, lambda: calls.append("again"))
    hooks = [f for f in sys.meta_path if isinstance(f, _AfterImport) and f.name == name]
    try:
        assert len(hooks) == 1 and calls == ["now"]
    finally:
        for hook in hooks:
            sys.meta_path.remove(hook)


def test_only_callbacks_that_accept_the_run_are_built(isolated_plugins):
    isolated_plugins(
        "two",
        reasonrl_trainer_callbacks=lambda: [
            TrainerCallback("wanted", lambda config: ("built", config["x"])),
            TrainerCallback("not_needed", lambda config: None),
        ],
    )
    assert build_callbacks({"x": 1}) == [("wanted", ("built", 1))]


def test_two_callbacks_installing_the_actor_loss_stop_the_run():
    from types import SimpleNamespace

    import pytest

    from reasonrl.bridges.verl_trainer import check_single_actor_loss

    installs = SimpleNamespace(replaces_actor_loss=True)
    check_single_actor_loss([("a", installs), ("b", SimpleNamespace())])
    with pytest.raises(RuntimeError, match=r"\['a', 'c'\] each install the actor's loss function"):
        check_single_actor_loss([("a", installs), ("b", SimpleNamespace()), ("c", installs)])
