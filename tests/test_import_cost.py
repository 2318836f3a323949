"""What reasonrl adds to ``import verl`` (issue 48): the bridge registers names, not modules.

verl imports its ``verl.plugins`` entry points in every process that imports it (driver, TaskRunner,
each worker and actor); loss, estimator and model classes are imported only where verl or
transformers first looks them up (``bridges.import_hooks``, ``compat.transformers``).
``reasonrl bench overhead`` prints the time this costs.
"""

from __future__ import annotations

import json

from reasonrl.testing.fresh_process import python_fresh

#: what the bridge may add to ``import verl``: reasonrl's own modules, its plugin manager, the
#: version checks of its patches, and the verl helpers the CPU platform's class is built from
LIGHT = ("reasonrl", "__editable__", "pluggy", "packaging", "verl.utils.")

PROBE = (
    "import json, sys, verl\n"
    "from reasonrl.manager import load_errors\n"
    "print(json.dumps([sorted(sys.modules), [e.where for e in load_errors()]]))\n"
)


def imported_by_import_verl(plugins: str) -> tuple[set[str], list[str]]:
    result = python_fresh(PROBE, env={"VERL_USE_EXTERNAL_PLUGINS": plugins})
    assert result.returncode == 0, result.stderr[-2000:]
    modules, errors = json.loads(result.stdout.strip().splitlines()[-1])
    return set(modules), errors


def test_import_verl_with_the_bridge_imports_no_model_loss_or_trainer_code():
    without, _ = imported_by_import_verl("none")
    with_bridge, errors = imported_by_import_verl("auto")
    added = with_bridge - without
    assert "reasonrl.bridges.verl" in added and errors == [], "the bridge ran, without failures"
    heavy = sorted(m for m in added if not m.startswith(LIGHT))
    # e.g. transformers' modeling code (a plugin's model class), verl.trainer.ppo.core_algos (a
    # loss registered eagerly pulls verl.workers.config and transformers in: +1 s in every process)
    assert heavy == [], f"import verl now also imports {heavy[:20]}: register by name, import on first lookup"
