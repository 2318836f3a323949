"""objectives: the reports' policy objectives for verl (LongCat §3.2.1, Kimi k1.5 §2.3.2).

- ``longcat``: LongCat-Flash-Thinking §3.2.1 triplet clipping + truncated importance
  sampling + the constant G·T_max denominator, no KL; verl's own keys carry the knobs
  (``+reasonrl/objective=longcat``), the loss mode adds the per-region metrics.
- the ε_pos_high schedule (constant / linear / step), applied each step by a callback in
  reasonrl's trainer mode ``reasonrl_sync``.
- ``kimi_mirror_descent``: Kimi k1.5 §2 policy mirror descent (``+reasonrl/objective=kimi_mirror_descent``).
- a start-up guard: truncated IS with top-p < 1 or top-k > 0 sampling is refused.

Framework-free math in ``core.py`` / ``schedule.py``; verl adapters in ``verl_*.py``.
"""

from __future__ import annotations

from reasonrl.config import ConfigError, config_value, require_trainer_mode
from reasonrl.contracts import CliCommand, ConfigGroup, PluginInfo, Registration, TrainerCallback
from reasonrl.hookspecs import hookimpl
from reasonrl.plugins.objectives.config import OBJECTIVE_GROUP

#: verl keys each report-named knob is mapped onto by the option files.
LONGCAT_MAPPING = {
    "eps_neg_low": "actor_rollout_ref.actor.clip_ratio_low",
    "eps_pos_high": "actor_rollout_ref.actor.clip_ratio_high",
    "eps_neg_high": "actor_rollout_ref.actor.clip_ratio_c",
    "tis_cap": "algorithm.rollout_correction.rollout_is_threshold",
    "t_max": "actor_rollout_ref.actor.loss_scale_factor",
}


def _register_losses() -> None:
    # when verl's loss registry is imported (the actor workers), not in every process importing verl
    from reasonrl.bridges.import_hooks import register_adapter_when_loaded

    register_adapter_when_loaded("verl.trainer.ppo.core_algos", "reasonrl.plugins.objectives.verl_losses")


def _register_megatron_optimizer() -> None:
    # verl's Megatron engine has no optimizer class path: its optimizer build is wrapped (see the adapter)
    from reasonrl.bridges.import_hooks import register_adapter_when_loaded

    register_adapter_when_loaded(
        "verl.workers.engine.megatron.transformer_impl", "reasonrl.plugins.objectives.verl_megatron_optimizer"
    )


def _build_schedule_callback(config):
    from reasonrl.plugins.objectives.verl_schedule import build

    return build(config)


@hookimpl
def reasonrl_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="objectives",
        summary="LongCat triplet clipping + truncated IS + G·T_max, ε_pos_high schedule, Kimi policy mirror descent",
        reports=("LongCat-Flash-Thinking §3.2.1", "Kimi k1.5 §2"),
    )


@hookimpl
def reasonrl_verl_registrations() -> list[Registration]:
    return [
        Registration("verl", "policy_loss", "longcat", _register_losses, "core_algos.POLICY_LOSS_REGISTRY['longcat']"),
        Registration(
            "verl",
            "policy_loss",
            "kimi_mirror_descent",
            _register_losses,
            "core_algos.POLICY_LOSS_REGISTRY['kimi_mirror_descent']",
        ),
        Registration(
            "verl",
            "optimizer",
            "IterationResetAdamW@megatron",
            _register_megatron_optimizer,
            "MegatronEngine._build_optimizer wrapped: megatron-core's adam, reset every iteration, where the "
            "actor's optim names IterationResetAdamW (verl's FSDP engines build it from optim.optimizer_impl)",
        ),
    ]


@hookimpl
def reasonrl_trainer_callbacks() -> list[TrainerCallback]:
    return [TrainerCallback("eps_pos_high_schedule", _build_schedule_callback)]


@hookimpl
def reasonrl_config_resolvers() -> dict:
    from reasonrl.plugins.objectives.optimizer import optimizer_config_class, updates_per_iteration

    return {
        "reasonrl.updates_per_iteration": updates_per_iteration,
        "reasonrl.optimizer_config_class": optimizer_config_class,
    }


@hookimpl
def reasonrl_config_groups() -> list[ConfigGroup]:
    return [OBJECTIVE_GROUP]


def check_tis_sampling(config) -> None:
    """Truncated IS with top-p < 1 or top-k > 0 is biased: the sampler's probabilities are
    renormalised over the kept tokens, so log(π_train/π_rollout) carries the log of the kept
    mass on every token. Refuse unless ``reasonrl.objective.allow_biased_tis`` is true."""
    if config_value(config, "algorithm.rollout_correction.rollout_is") is None:
        return
    if config_value(config, "reasonrl.objective.allow_biased_tis"):
        return
    top_p = config_value(config, "actor_rollout_ref.rollout.top_p")
    top_k = config_value(config, "actor_rollout_ref.rollout.top_k")
    truncated = []
    if top_p is not None and float(top_p) < 1.0:
        truncated.append(f"actor_rollout_ref.rollout.top_p={top_p}")
    if top_k is not None and int(top_k) > 0:
        truncated.append(f"actor_rollout_ref.rollout.top_k={top_k}")
    if truncated:
        raise ConfigError(
            "algorithm.rollout_correction.rollout_is",
            f"truncated importance sampling with {' and '.join(truncated)} is biased: the rollout engine's "
            "log-probs are renormalised over the kept tokens, so exp(old_logp - rollout_logp) is off by the "
            "kept probability mass on every token. Sample with top_p=1.0 and top_k=-1, or set "
            "++reasonrl.objective.allow_biased_tis=true to run anyway.",
        )


def check_objective(config) -> None:
    """The option file's switch is consistent with verl's keys (a direct override of a mapped
    verl key would silently diverge from the report-named knob)."""
    name = config_value(config, "reasonrl.objective.name")
    if name is None:
        return
    loss_mode = config_value(config, "actor_rollout_ref.actor.policy_loss.loss_mode")
    if loss_mode != name:
        raise ConfigError(
            "actor_rollout_ref.actor.policy_loss.loss_mode",
            f"is {loss_mode!r} but reasonrl.objective.name is {name!r}: use +reasonrl/objective={name}",
        )
    if name == "longcat":
        for knob, verl_key in LONGCAT_MAPPING.items():
            knob_value, verl_value = config_value(config, f"reasonrl.objective.{knob}"), config_value(config, verl_key)
            if verl_value is None or float(verl_value) != float(knob_value):
                raise ConfigError(
                    verl_key,
                    f"= {verl_value} but reasonrl.objective.{knob} = {knob_value}; set the report-named knob (reasonrl.objective.{knob}) instead",
                )
    schedule = config_value(config, "reasonrl.objective.eps_pos_high_schedule") or "constant"
    if schedule != "constant":
        require_trainer_mode(config, f"the ε_pos_high schedule ({schedule})")
        if config_value(config, "distillation.enabled"):
            raise ConfigError(
                "reasonrl.objective.eps_pos_high_schedule",
                "cannot be combined with verl's distillation loss (it replaces the actor's loss function)",
            )


OPTIMIZER_MODULE = "reasonrl.plugins.objectives.optimizer"


def check_optimizer_reset(config) -> None:
    """Kimi's per-iteration optimizer reset (``IterationResetAdamW``) is built by verl's
    ``build_optimizer`` (FSDP engines) or, on verl's Megatron engine, by megatron-core with the reset
    added (``verl_megatron_optimizer``), and must step as many times per iteration as verl does."""
    optim = "actor_rollout_ref.actor.optim"
    if config_value(config, f"{optim}.optimizer_impl") != OPTIMIZER_MODULE:
        return
    strategy = config_value(config, "actor_rollout_ref.actor.strategy")
    if strategy not in ("fsdp", "fsdp2", "megatron"):
        raise ConfigError(
            "actor_rollout_ref.actor.strategy",
            f"is {strategy!r}: the per-iteration optimizer reset ({optim}.optimizer_impl={OPTIMIZER_MODULE}) "
            "is built by verl's FSDP and Megatron engines only (fsdp, fsdp2, megatron)",
        )
    from reasonrl.plugins.objectives.optimizer import updates_per_iteration

    actor = "actor_rollout_ref.actor"
    expected = updates_per_iteration(
        config_value(config, "data.train_batch_size"),
        config_value(config, f"{actor}.ppo_mini_batch_size"),
        config_value(config, f"{actor}.ppo_epochs", 1),
    )
    given = config_value(config, f"{optim}.override_optimizer_config.updates_per_iteration")
    if given != expected:
        raise ConfigError(
            f"{optim}.override_optimizer_config.updates_per_iteration",
            f"is {given} but one iteration makes {expected} optimizer steps (data.train_batch_size · "
            f"{actor}.ppo_epochs / {actor}.ppo_mini_batch_size): leave the option file's interpolation in place",
        )


@hookimpl
def reasonrl_check_config(config) -> None:
    check_tis_sampling(config)
    check_objective(config)
    check_optimizer_reset(config)


@hookimpl
def reasonrl_benchmarks() -> list[CliCommand]:
    # benchmarks/objectives/ of a source checkout; the installed package holds no benchmarks
    from reasonrl.source_checkout import checkout_benchmarks

    return checkout_benchmarks("objectives")


@hookimpl
def reasonrl_reaches() -> list:
    # the upstream internals only this plugin uses, declared beside their accessors
    from reasonrl.plugins.objectives.compat import REACHES

    return list(REACHES)
