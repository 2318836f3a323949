"""One actor loss for trainer mode ``reasonrl_sync``: verl's own ``ppo_loss`` plus every active
plugin's auxiliary term (issue 20).

Plugins no longer install the whole actor loss. A :class:`~reasonrl.contracts.TrainerCallback`
offers a *term* (``actor_loss_term()``); the trainer composes the terms of all its callbacks into
one :class:`ComposedActorLoss` and installs it once through the actor workers' own
``set_loss_fn``. A term may have:

- ``adjust_config(config, data)``: set a per-step value on verl's loss config before
  ``ppo_loss`` runs, read from the micro-batch (values a callback put into ``extra_info`` in
  ``before_actor_update`` travel with the data) — e.g. the ε_pos_high schedule;
- ``loss(config, model_output, data, metrics) -> (tensor, {name: Metric})``: an additive term,
  already weighted (its weight or schedule is the term's) — e.g. MiMo's λ·mean_k L^k;
- ``on_worker()``: called once where the composed loss arrives (the actor worker process).

The loss is L = ppo_loss(config adjusted by every term) + Σ_terms term.loss.

Each term's forward time (``adjust_config`` and ``loss``; its backward is inside verl's) is
logged per step as ``actor/reasonrl/timing_s/loss/<callback>``, summed over the step's micro-batches.
"""

from __future__ import annotations

import time
from typing import Any

#: per step and loss term: seconds in its forward code; named as verl logs it (the actor's metrics
#: go under ``actor/``: a name without that prefix gets it)
LOSS_TIMING = "actor/reasonrl/timing_s/loss/"


class ComposedActorLoss:
    """verl's ``ppo_loss`` with the terms' config adjustments, plus their additive losses.
    Holds the actor config (OmegaConf), converted as verl's worker does, in the worker."""

    def __init__(self, actor_config: Any, terms: list[tuple[str, Any]]) -> None:
        self.actor_config, self.terms = actor_config, list(terms)
        self._config = None

    def __getstate__(self):
        return {**self.__dict__, "_config": None}

    def __setstate__(self, state) -> None:
        """Unpickled in an actor worker (verl's ``set_loss_fn``)."""
        self.__dict__.update(state)
        for _name, term in self.terms:
            term.on_worker()

    def config(self):
        from omegaconf import DictConfig
        from verl.utils.config import omega_conf_to_dataclass

        if self._config is None:
            self._config = (
                omega_conf_to_dataclass(self.actor_config)
                if isinstance(self.actor_config, DictConfig)
                else self.actor_config
            )
        return self._config

    def __call__(self, model_output, data, dp_group=None):
        from verl.utils.metric import AggregationType, Metric
        from verl.workers.utils.losses import ppo_loss

        config = self.config()
        seconds = dict.fromkeys((name for name, _term in self.terms), 0.0)
        for name, term in self.terms:
            start = time.perf_counter()
            term.adjust_config(config, data)
            seconds[name] += time.perf_counter() - start
        loss, metrics = ppo_loss(config, model_output, data, dp_group)
        for name, term in self.terms:
            start = time.perf_counter()
            added = term.loss(config, model_output, data, metrics)
            seconds[name] += time.perf_counter() - start
            if added is None:
                continue
            extra, extra_metrics = added
            clash = set(extra_metrics) & set(metrics)
            if clash:
                raise RuntimeError(f"actor loss term {name!r} logs metrics verl's loss already logs: {sorted(clash)}")
            loss = loss + extra
            metrics.update(extra_metrics)
        for name, spent in seconds.items():  # summed over the step's micro-batches
            metrics[LOSS_TIMING + name] = Metric(AggregationType.SUM, spent)
        return loss, metrics


def actor_loss_terms(callbacks: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``(callback name, term)`` for every callback that offers an actor-loss term."""
    from reasonrl.callbacks import ActorLossTerm

    terms = []
    for name, callback in callbacks:
        term = callback.actor_loss_term()
        if term is None:
            continue
        if not isinstance(term, ActorLossTerm):
            raise TypeError(
                f"reasonrl callback {name!r}: its actor_loss_term is not a reasonrl.callbacks.ActorLossTerm"
            )
        terms.append((name, term))
    return terms


def install(trainer, callbacks: list[tuple[str, Any]]) -> ComposedActorLoss | None:
    """Compose the callbacks' terms and install the loss in the actor workers (none: verl's own)."""
    terms = actor_loss_terms(callbacks)
    if not terms:
        return None
    loss = ComposedActorLoss(trainer.config.actor_rollout_ref.actor, terms)
    trainer.actor_rollout_wg.set_loss_fn(loss)
    return loss
