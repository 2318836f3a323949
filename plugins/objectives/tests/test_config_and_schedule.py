"""Knobs validated at start-up (the key and the allowed range named), the option files'
mapping onto verl's keys, the TIS guard, and the ε_pos_high schedule."""

from __future__ import annotations

import pytest
import torch

from reasonrl.config import ConfigError
from reasonrl.plugins.objectives.schedule import EpsSchedule

INVALID_KNOBS = [
    ("eps_neg_low", 0.0, "(0.0, 1.0)"),
    ("eps_neg_low", 1.0, "(0.0, 1.0)"),
    ("eps_pos_high", -0.1, "(0.0, 1.0)"),
    ("eps_pos_high", 1.5, "(0.0, 1.0)"),
    ("eps_neg_high", 1.0, "(1.0, inf)"),
    ("eps_neg_high", 0.5, "(1.0, inf)"),
    ("tis_cap", 0.99, "[1.0, inf)"),
    ("t_max", 0, "[1, inf)"),
    ("tau", 0.0, "(0.0, inf)"),
    ("kimi_level", "prompt", "one of ['sequence', 'token']"),
    ("eps_pos_high_schedule", "cosine", "one of ['constant', 'linear', 'step']"),
    ("eps_pos_high_end", 1.0, "(0.0, 1.0)"),
    ("eps_pos_high_steps", 0, "[1, inf)"),
    ("eps_pos_high_factor", 0.0, "(0.0, inf)"),
]


def compose(*overrides: str):
    from reasonrl.composition import compose_config

    return compose_config(list(overrides))


def validate(*overrides: str):
    from reasonrl.api import validate_config

    return validate_config(compose(*overrides))


@pytest.mark.parametrize(("knob", "value", "allowed"), INVALID_KNOBS)
def test_each_invalid_knob_fails_naming_key_and_range(knob, value, allowed):
    with pytest.raises(ConfigError) as error:
        validate("recipe=longcat", f"++reasonrl.objective.{knob}={value}")
    assert error.value.key == f"reasonrl.objective.{knob}" and allowed in str(error.value)


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["reasonrl.objective.eps_pos_high_schedule=linear"], "reasonrl.objective.eps_pos_high_end"),
        (
            ["reasonrl.objective.eps_pos_high_schedule=step", "reasonrl.objective.eps_pos_high_milestones=[5,3]"],
            "reasonrl.objective.eps_pos_high_milestones",
        ),
        (
            [
                "reasonrl.objective.eps_pos_high_schedule=step",
                "reasonrl.objective.eps_pos_high_milestones=[2,4]",
                "reasonrl.objective.eps_pos_high_factor=2.0",
            ],
            "reasonrl.objective.eps_pos_high_factor",
        ),
        (
            [
                "reasonrl.objective.eps_pos_high_schedule=linear",
                "reasonrl.objective.eps_pos_high_end=0.3",
                "trainer.v1.trainer_mode=sync",
            ],
            "trainer.v1.trainer_mode",
        ),
        (["actor_rollout_ref.actor.clip_ratio_high=0.3"], "actor_rollout_ref.actor.clip_ratio_high"),
        (["actor_rollout_ref.actor.policy_loss.loss_mode=vanilla"], "actor_rollout_ref.actor.policy_loss.loss_mode"),
    ],
)
def test_cross_field_rules(overrides, key):
    with pytest.raises(ConfigError) as error:
        validate("recipe=longcat", *overrides)
    assert error.value.key == key


def test_option_file_maps_every_report_knob_onto_verl():
    config = compose(
        "recipe=mimo",
        "+reasonrl/objective=longcat",
        "reasonrl.objective.eps_pos_high=0.31",
        "reasonrl.objective.tis_cap=1.5",
    )
    actor = config.actor_rollout_ref.actor
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.clip_ratio_c) == (0.2, 0.31, 3.0)
    assert (actor.loss_agg_mode, actor.loss_scale_factor) == (
        "seq-mean-token-sum-norm",
        config.data.max_response_length,
    )
    assert actor.policy_loss.loss_mode == "longcat" and actor.policy_loss.tis_cap == 1.5 and not actor.use_kl_loss
    correction = config.algorithm.rollout_correction
    assert (correction.rollout_is, correction.rollout_is_threshold) == ("token", 1.5)
    assert not config.algorithm.use_kl_in_reward


def test_merged_config_makes_verls_vanilla_loss_equation_4():
    """No reasonrl loss involved: verl's own `vanilla` under the option file's keys."""
    import verl  # noqa: F401
    from verl.trainer.ppo.core_algos import get_policy_loss_fn
    from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_weights
    from verl.utils.config import omega_conf_to_dataclass

    from reasonrl.plugins.objectives.tests.reference import longcat_equation_4

    config = compose("recipe=mimo", "+reasonrl/objective=longcat", "data.max_response_length=12")
    actor = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    generator = torch.Generator().manual_seed(3)
    rows, columns = 6, 12
    old = -torch.rand(rows, columns, generator=generator, dtype=torch.float64) * 3
    log_prob = old + torch.randn(rows, columns, generator=generator, dtype=torch.float64)
    rollout = old + torch.randn(rows, columns, generator=generator, dtype=torch.float64) * 0.5
    advantages = torch.randn(rows, 1, generator=generator, dtype=torch.float64).expand(rows, columns).clone()
    mask = torch.arange(columns)[None, :] < torch.tensor([12, 5, 0, 9, 12, 1])[:, None]
    correction = config.algorithm.rollout_correction
    weights, _ = compute_rollout_correction_weights(
        old - rollout, mask, rollout_is=correction.rollout_is, rollout_is_threshold=correction.rollout_is_threshold
    )
    actor.global_batch_info.update(
        dp_size=1, batch_num_tokens=None, global_batch_size=rows, loss_scale_factor=actor.loss_scale_factor
    )
    loss, _metrics = get_policy_loss_fn("vanilla")(old, log_prob, advantages, mask, actor.loss_agg_mode, actor, weights)
    objective = config.reasonrl.objective
    expected = longcat_equation_4(
        log_prob,
        old,
        rollout,
        advantages,
        mask,
        objective.eps_neg_low,
        objective.eps_pos_high,
        objective.eps_neg_high,
        objective.tis_cap,
        objective.t_max,
    )
    assert torch.allclose(loss, expected, atol=1e-9)


@pytest.mark.parametrize(
    ("top_p", "top_k", "refused"), [(1.0, -1, False), (0.95, -1, True), (1.0, 20, True), (1.0, 0, False)]
)
def test_tis_with_truncated_sampling_is_refused_unless_allowed(top_p, top_k, refused):
    overrides = [
        "recipe=longcat",
        f"actor_rollout_ref.rollout.top_p={top_p}",
        f"actor_rollout_ref.rollout.top_k={top_k}",
    ]
    if refused:
        with pytest.raises(ConfigError) as error:
            validate(*overrides)
        assert error.value.key == "algorithm.rollout_correction.rollout_is" and "allow_biased_tis" in str(error.value)
        validate(*overrides, "++reasonrl.objective.allow_biased_tis=true")
    else:
        validate(*overrides)


def test_tis_guard_covers_plain_verl_rollout_correction():
    """Without the option file too: verl's own TIS switch with top-p sampling."""
    with pytest.raises(ConfigError):
        validate("recipe=mimo", "algorithm.rollout_correction.rollout_is=token", "actor_rollout_ref.rollout.top_p=0.9")


def test_kimi_option_gives_mean_baseline_advantages_and_its_loss():
    config = compose("recipe=mimo", "+reasonrl/objective=kimi_mirror_descent", "reasonrl.objective.tau=0.5")
    assert config.algorithm.adv_estimator == "grpo" and config.algorithm.norm_adv_by_std_in_grpo is False
    policy_loss = config.actor_rollout_ref.actor.policy_loss
    assert (policy_loss.loss_mode, policy_loss.tau, policy_loss.kimi_level) == ("kimi_mirror_descent", 0.5, "sequence")
    assert config.actor_rollout_ref.actor.loss_agg_mode == "seq-mean-token-sum"


def test_constant_schedule():
    assert [EpsSchedule("constant", start=0.28).value(s) for s in (0, 1, 100)] == [0.28, 0.28, 0.28]


def test_linear_schedule_boundaries():
    schedule = EpsSchedule("linear", start=0.2, end=0.3, steps=11)
    assert schedule.value(1) == 0.2 and schedule.value(0) == 0.2
    assert abs(schedule.value(6) - 0.25) < 1e-12
    assert abs(schedule.value(11) - 0.3) < 1e-12 and abs(schedule.value(500) - 0.3) < 1e-12
    assert EpsSchedule("linear", start=0.2, end=0.3, steps=1).value(1) == 0.3


def test_step_schedule_changes_at_the_milestone():
    schedule = EpsSchedule("step", start=0.2, milestones=(10, 20), factor=1.5)
    assert [round(schedule.value(s), 6) for s in (9, 10, 19, 20, 1000)] == [0.2, 0.3, 0.3, 0.45, 0.45]


def test_schedule_callback_only_for_a_changing_schedule():
    from reasonrl.plugins.objectives.verl_schedule import build

    assert build(compose("recipe=longcat")) is None
    assert build(compose("recipe=mimo")) is None
    callback = build(
        compose(
            "recipe=longcat",
            "reasonrl.objective.eps_pos_high_schedule=linear",
            "reasonrl.objective.eps_pos_high_end=0.4",
            "reasonrl.objective.eps_pos_high_steps=3",
        )
    )
    extra_info, metrics = {}, {}

    class Trainer:
        global_steps = 2

    callback.before_actor_update(Trainer(), extra_info, metrics)
    assert (
        abs(extra_info["reasonrl_eps_pos_high"] - 0.34) < 1e-12
        and metrics["actor/eps_pos_high"] == extra_info["reasonrl_eps_pos_high"]
    )


def test_bench_objective_prints_both_times_and_their_ratio():
    from reasonrl.testing.fresh_process import reasonrl_fresh

    result = reasonrl_fresh(
        ["bench", "objective", "--batch", "4", "--tokens", "64", "--repeats", "2", "--device", "cpu"]
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    vanilla, longcat = (float(lines[name].split()[-2]) for name in ("vanilla", "longcat"))
    ratio = float(lines["ratio"].split()[1].rstrip("x"))
    # the printed times are rounded to 1 µs, the ratio to 0.001
    assert vanilla > 0 and longcat > 0 and abs(ratio * vanilla - longcat) <= 0.001 + 0.0006 * vanilla
