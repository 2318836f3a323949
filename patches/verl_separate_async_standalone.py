"""verl 0.9.1's ``separate_async`` trainer with ``actor_rollout_ref.hybrid_engine=false`` (rollout
only on the standalone replicas: generation apart from training, DORA's topology) stops while it
starts: ``PPOTrainerSeparateAsync._setup`` (``verl/trainer/ppo/v1/trainer_separate_async.py:181``)
passes ``flush=True`` to ``logging.Logger.info``, which raises TypeError. The patch gives that
module a logger that drops the ``flush`` keyword; every message is still logged. A module-level
logger call: no extension point.
"""

from __future__ import annotations

import logging

from reasonrl.patching import Patch

MODULE = "verl.trainer.ppo.v1.trainer_separate_async"


class FlushTolerantLogger(logging.LoggerAdapter):
    """The module's logger, ignoring ``flush=`` (a ``print`` keyword passed to ``logger.info``)."""

    def log(self, level, msg, *args, **kwargs):
        kwargs.pop("flush", None)
        super().log(level, msg, *args, **kwargs)

    def process(self, msg, kwargs):
        kwargs.pop("flush", None)
        return msg, kwargs


def _apply() -> None:
    # the trainer module is not imported by `import verl` (the trigger): patch on its import
    from reasonrl.bridges.import_hooks import run_after_import

    run_after_import(MODULE, _tolerate_flush)


def _tolerate_flush() -> None:
    import importlib

    module = importlib.import_module(MODULE)
    if not isinstance(module.logger, FlushTolerantLogger):
        module.logger = FlushTolerantLogger(module.logger, {})


PATCH = Patch(
    name="verl-separate-async-standalone",
    package="verl",
    versions=">=0.9.1,<0.10",
    changes=(
        "verl.trainer.ppo.v1.trainer_separate_async.logger: a LoggerAdapter that drops the flush keyword, so "
        "separate_async with actor_rollout_ref.hybrid_engine=false (standalone rollout replicas only) starts."
    ),
    upstream_issue="",  # none filed
    upstream_problem="PPOTrainerSeparateAsync._setup calls logger.info(..., flush=True): TypeError when hybrid_engine=false",
    apply=_apply,
    trigger="verl",
)
