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


def test_run_after_import_calls_now_when_already_imported_and_runs_every_waiting_callback(tmp_path, monkeypatch):
    calls = []
    run_after_import("json", lambda: calls.append("now"))  # imported long ago
    assert calls == ["now"]
    package = tmp_path / "reasonrl_probe_two"
    package.mkdir()
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    name = "reasonrl_probe_two"
    # two plugins wait for one module (both register agent loops in verl's agent-loop registry)
    run_after_import(name, lambda: calls.append("first"))
    run_after_import(name, lambda: calls.append("second"))
    hooks = [f for f in sys.meta_path if isinstance(f, _AfterImport) and f.name == name]
    try:
        assert len(hooks) == 1 and calls == ["now"], "one hook per module, nothing run before the import"
        import reasonrl_probe_two  # noqa: F401

        assert calls == ["now", "first", "second"], "neither callback is dropped"
    finally:
        for hook in hooks:
            if hook in sys.meta_path:
                sys.meta_path.remove(hook)
        sys.modules.pop(name, None)


def test_only_callbacks_that_accept_the_run_are_built(isolated_plugins):
    isolated_plugins(
        "two",
        reasonrl_trainer_callbacks=lambda: [
            TrainerCallback("wanted", lambda config: ("built", config["x"])),
            TrainerCallback("not_needed", lambda config: None),
        ],
    )
    assert build_callbacks({"x": 1}) == [("wanted", ("built", 1))]


def test_callbacks_that_change_the_actor_loss_compose_into_one_loss():
    """Each offers a term; the trainer installs one composed loss (no callback replaces it)."""
    from types import SimpleNamespace

    from reasonrl.bridges import verl_actor_loss

    installed = []
    trainer = SimpleNamespace(
        config=SimpleNamespace(actor_rollout_ref=SimpleNamespace(actor={"strategy": "fsdp"})),
        actor_rollout_wg=SimpleNamespace(set_loss_fn=installed.append),
    )
    first, second = (
        SimpleNamespace(adjust_config=lambda config, data: None),
        SimpleNamespace(loss=lambda *args: (0.0, {})),
    )
    callbacks = [
        ("a", SimpleNamespace(actor_loss_term=lambda: first)),
        ("b", SimpleNamespace()),
        ("c", SimpleNamespace(actor_loss_term=lambda: second)),
    ]
    loss = verl_actor_loss.install(trainer, callbacks)
    assert installed == [loss] and loss.terms == [("a", first), ("c", second)]
    assert (
        verl_actor_loss.install(trainer, [("b", SimpleNamespace())]) is None and len(installed) == 1
    )  # verl's own loss stays
