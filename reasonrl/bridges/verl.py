"""verl bridge: the target of reasonrl's ``verl.plugins`` entry point.

verl imports every ``verl.plugins`` entry point at the end of ``import verl`` (in the driver
and in every Ray worker) but only logs failures at debug level. Importing this module is
the whole action: it applies reasonrl's verl patches and registrations and prints any
failure to stderr itself, and registers reasonrl's trainer mode ``reasonrl_sync`` (plugin
callbacks, ``bridges/verl_trainer.py``) and its composable agent loop ``reasonrl`` (the plugins'
request transforms, ``bridges/verl_agent_loop.py``). ``reasonrl train`` then checks :data:`STATUS`.
"""

import traceback

from reasonrl.bridges import run_bridge
from reasonrl.manager import LoadError, report

STATUS = run_bridge("verl")

try:
    from reasonrl.bridges.verl_trainer import register_when_imported

    register_when_imported()
except Exception as exc:  # reported like a plugin failure: reasonrl train refuses to start
    report(
        LoadError("reasonrl", "verl trainer mode reasonrl_sync", f"{type(exc).__name__}: {exc}", traceback.format_exc())
    )

try:
    from reasonrl.bridges.import_hooks import register_agent_loop_when_loaded

    register_agent_loop_when_loaded("reasonrl.bridges.verl_agent_loop")
except Exception as exc:
    report(LoadError("reasonrl", "verl agent loop reasonrl", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
