"""reasonrl's verl trainer mode: registered right after verl's trainer package is imported,
in whichever process imports it, and its callbacks come from the plugins."""

from __future__ import annotations

import sys

import pytest

from reasonrl.bridges.import_hooks import _AfterImport, run_after_import
from reasonrl.bridges.verl_trainer import build_callbacks
from reasonrl.callbacks import (
    ActorLossTerm,
    CheckpointedState,
    GroupCarrier,
    PromptSource,
    RolloutSchedule,
    StepCallback,
    single,
)
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


class _Built(StepCallback):
    def __init__(self, value):
        self.value = value


def test_only_callbacks_that_accept_the_run_are_built(isolated_plugins):
    built = {}
    isolated_plugins(
        "two",
        reasonrl_trainer_callbacks=lambda: [
            TrainerCallback("wanted", lambda config: built.setdefault("wanted", _Built(config["x"]))),
            TrainerCallback("not_needed", lambda config: None),
        ],
    )
    assert build_callbacks({"x": 1}) == [("wanted", built["wanted"])]


def test_a_callback_that_is_not_a_step_callback_is_refused_naming_it(isolated_plugins):
    isolated_plugins("duck", reasonrl_trainer_callbacks=lambda: [TrainerCallback("quack", lambda config: object())])
    with pytest.raises(TypeError, match="plugin 'duck': trainer callback 'quack' built a object, not a reasonrl"):
        build_callbacks({})


def test_single_owner_roles_are_found_by_type_and_two_owners_refused():
    class Source(PromptSource):
        def next_prompts(self, trainer, count, refill, **kwargs):
            return list(range(count))

    class Schedule(RolloutSchedule):
        pass

    plain, source = StepCallback(), Source()
    assert single([("a", plain), ("b", source)], PromptSource) == ("b", source)
    assert single([("a", plain)], RolloutSchedule) is None
    with pytest.raises(RuntimeError, match=r"\['b', 'c'\] each want to choose the prompts"):
        single([("a", plain), ("b", source), ("c", Source())], PromptSource)
    assert single([("s", Schedule())], RolloutSchedule)[0] == "s"


def test_the_defaults_are_no_ops_the_trainer_can_call_on_any_callback():
    callback = StepCallback()
    assert callback.batch_fields(None) == {} and callback.actor_loss_term() is None
    assert callback.before_advantage(None, None, {}, later_argument=1) is None  # **kwargs: forward compatible
    carrier = GroupCarrier()
    assert carrier.holds_group(None, []) is False and carrier.carried_prompts(None, 3, False) == []
    assert RolloutSchedule.keeps_groups is False and RolloutSchedule().order_batch(["b", "a"], 3) == ["b", "a"]
    assert ActorLossTerm().loss(None, None, None, {}) is None


def test_the_built_in_callbacks_take_their_roles_by_type():
    from reasonrl.plugins.length_curriculum.verl_callback import LengthCurriculumCallback
    from reasonrl.plugins.rollout.verl_callback import (
        PartialRolloutCallback,
        SeamlessRolloutCallback,
        StalenessRolloutCallback,
    )
    from reasonrl.plugins.sampling.verl_adapter import SamplingCallback

    assert issubclass(SamplingCallback, PromptSource) and issubclass(SamplingCallback, CheckpointedState)
    assert issubclass(PartialRolloutCallback, GroupCarrier) and not issubclass(PartialRolloutCallback, RolloutSchedule)
    assert issubclass(SeamlessRolloutCallback, RolloutSchedule) and issubclass(
        StalenessRolloutCallback, RolloutSchedule
    )
    assert issubclass(LengthCurriculumCallback, CheckpointedState)


def test_callbacks_that_change_the_actor_loss_compose_into_one_loss():
    """Each offers a term; the trainer installs one composed loss (no callback replaces it)."""
    from types import SimpleNamespace

    from reasonrl.bridges import verl_actor_loss

    class Term(ActorLossTerm):
        pass

    class Offers(StepCallback):
        def __init__(self, term):
            self.term = term

        def actor_loss_term(self, **kwargs):
            return self.term

    installed = []
    trainer = SimpleNamespace(
        config=SimpleNamespace(actor_rollout_ref=SimpleNamespace(actor={"strategy": "fsdp"})),
        actor_rollout_wg=SimpleNamespace(set_loss_fn=installed.append),
    )
    first, second = Term(), Term()
    callbacks = [("a", Offers(first)), ("b", StepCallback()), ("c", Offers(second))]
    loss = verl_actor_loss.install(trainer, callbacks)
    assert installed == [loss] and loss.terms == [("a", first), ("c", second)]
    assert verl_actor_loss.install(trainer, [("b", StepCallback())]) is None and len(installed) == 1  # verl's own
    with pytest.raises(TypeError, match="'d': its actor_loss_term is not a reasonrl.callbacks.ActorLossTerm"):
        verl_actor_loss.actor_loss_terms([("d", Offers(SimpleNamespace()))])
