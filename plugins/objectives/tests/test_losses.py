"""The objectives' losses against independent implementations of the reports' equations
(LongCat §3.2.1, Kimi k1.5 §2.3.2), called the way
verl's actor calls them (verl's registry, verl's actor config and rollout-correction weights)."""

from __future__ import annotations

import functools
import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonrl.plugins.objectives.tests.reference import kimi_sample_losses, longcat_equation_4

# The longcat option file's defaults (hydra_configs/reasonrl/objective/longcat.yaml).
EPS_NEG_LOW, EPS_POS_HIGH, EPS_NEG_HIGH, TIS_CAP = 0.2, 0.28, 3.0, 2.0


@functools.lru_cache(maxsize=None)
def composed_actor_node(overrides: tuple[str, ...]):
    """verl's actor config node exactly as ``reasonrl train`` composes it."""
    from reasonrl.composition import compose_config

    return compose_config(list(overrides)).actor_rollout_ref.actor


def verl_actor_config(overrides: tuple[str, ...], rows: int):
    """The actor config verl's worker builds (``omega_conf_to_dataclass``), with the global
    batch info verl's ``ppo_loss`` fills in (every response counts, masked ones too)."""
    import verl  # noqa: F401  (reasonrl's bridge registers the losses)
    from verl.utils.config import omega_conf_to_dataclass

    config = omega_conf_to_dataclass(composed_actor_node(overrides))
    config.global_batch_info.update(
        dp_size=1, batch_num_tokens=None, global_batch_size=rows, loss_scale_factor=config.loss_scale_factor
    )
    return config


def longcat_config(rows: int, t_max: int = 8):
    return verl_actor_config(("recipe=longcat", "+preset=cpu_tiny", f"data.max_response_length={t_max}"), rows)


def kimi_config(rows: int, tau: float):
    return verl_actor_config(("recipe=kimi_k15", "+preset=cpu_tiny", f"reasonrl.objective.tau={tau}"), rows)


def tis_weights(old_log_prob, rollout_log_prob, mask):
    from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_weights

    if not mask.any():  # verl refuses an all-padding batch; its weights would all be 0
        return torch.zeros_like(old_log_prob)
    weights, _metrics = compute_rollout_correction_weights(
        old_log_prob - rollout_log_prob, mask, rollout_is="token", rollout_is_threshold=TIS_CAP
    )
    return weights


@st.composite
def batches(draw, max_gap: float = 30.0):
    rows, columns = draw(st.integers(1, 5)), draw(st.integers(1, 8))
    seed = draw(st.integers(0, 2**31 - 1))
    generator = torch.Generator().manual_seed(seed)
    old = -torch.rand(rows, columns, generator=generator, dtype=torch.float64) * 5
    gap = (torch.rand(rows, columns, generator=generator, dtype=torch.float64) * 2 - 1) * max_gap
    # some tokens exactly on the policy (ratio 1), some far off
    gap = torch.where(torch.rand(rows, columns, generator=generator) < 0.2, 0.0, gap)
    rollout = old + (torch.rand(rows, columns, generator=generator, dtype=torch.float64) * 2 - 1) * 2
    sign = torch.tensor(
        draw(st.lists(st.sampled_from([-1.0, 0.0, 1.0]), min_size=rows, max_size=rows)), dtype=torch.float64
    )
    advantages = (
        (sign[:, None] * (0.1 + torch.rand(rows, 1, generator=generator, dtype=torch.float64)))
        .expand(rows, columns)
        .clone()
    )
    lengths = draw(st.lists(st.integers(0, columns), min_size=rows, max_size=rows))  # 0: an all-masked row
    mask = torch.arange(columns)[None, :] < torch.tensor(lengths)[:, None]
    return old, old + gap, rollout, advantages, mask


def longcat(old, log_prob, rollout, advantages, mask, t_max):
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    config = longcat_config(rows=old.shape[0], t_max=t_max)
    return get_policy_loss_fn("longcat")(
        old, log_prob, advantages, mask, "seq-mean-token-sum-norm", config, tis_weights(old, rollout, mask)
    )


@settings(max_examples=60, deadline=None)
@given(batch=batches(), t_max=st.sampled_from([1, 7, 64]))
def test_longcat_loss_and_gradient_equal_equation_4(batch, t_max):
    old, log_prob, rollout, advantages, mask = batch
    ours_input, reference_input = log_prob.clone().requires_grad_(True), log_prob.clone().requires_grad_(True)
    loss, metrics = longcat(old, ours_input, rollout, advantages, mask, t_max)
    expected = longcat_equation_4(
        reference_input, old, rollout, advantages, mask, EPS_NEG_LOW, EPS_POS_HIGH, EPS_NEG_HIGH, TIS_CAP, t_max
    )
    assert torch.allclose(loss, expected, atol=1e-6, rtol=1e-6), (loss.item(), expected.item())
    loss.backward()
    if expected.requires_grad:
        expected.backward()
    reference_grad = reference_input.grad if reference_input.grad is not None else torch.zeros_like(log_prob)
    assert torch.isfinite(ours_input.grad).all()
    assert torch.allclose(ours_input.grad, reference_grad, atol=1e-6, rtol=1e-6)
    regions = (
        metrics["actor/longcat/clipfrac_low"]
        + metrics["actor/longcat/clipfrac_high"]
        + metrics["actor/longcat/clipfrac_dual_floor"]
    )
    assert 0.0 <= regions <= 1.0 + 1e-9
    assert (
        abs(
            metrics["actor/pg_clipfrac"]
            - metrics["actor/longcat/clipfrac_low"]
            - metrics["actor/longcat/clipfrac_high"]
        )
        < 1e-9
    )


@settings(max_examples=40, deadline=None)
@given(batch=batches(max_gap=5.0))
def test_clip_regions_are_exactly_the_tokens_without_gradient(batch):
    old, log_prob, rollout, advantages, mask = batch
    log_prob = log_prob.clone().requires_grad_(True)
    loss, metrics = longcat(old, log_prob, rollout, advantages, mask, t_max=8)
    loss.backward()
    moving = mask & (advantages != 0)
    frozen = (moving & (log_prob.grad == 0)).sum().item()
    valid = max(int(mask.sum()), 1)
    regions = (
        metrics["actor/longcat/clipfrac_low"]
        + metrics["actor/longcat/clipfrac_high"]
        + metrics["actor/longcat/clipfrac_dual_floor"]
    )
    assert abs(regions - frozen / valid) < 1e-9


@settings(max_examples=40, deadline=None)
@given(batch=batches())
def test_longcat_does_not_drift_from_verls_vanilla(batch):
    """Same verl config, same tensors: the value and verl's own metrics agree."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    old, log_prob, rollout, advantages, mask = batch
    config = longcat_config(rows=old.shape[0], t_max=16)
    weights = tis_weights(old, rollout, mask)
    ours, ours_metrics = get_policy_loss_fn("longcat")(
        old, log_prob, advantages, mask, "seq-mean-token-sum-norm", config, weights
    )
    vanilla, vanilla_metrics = get_policy_loss_fn("vanilla")(
        old, log_prob, advantages, mask, "seq-mean-token-sum-norm", config, weights
    )
    assert torch.allclose(ours, vanilla, atol=1e-12, rtol=1e-9)
    for key in ("actor/pg_clipfrac", "actor/pg_clipfrac_lower", "actor/ppo_kl"):
        assert abs(ours_metrics[key] - vanilla_metrics[key]) < 1e-6, key


def test_tis_metrics_count_the_capped_weights():
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    old = torch.zeros(2, 3, dtype=torch.float64)
    rollout = torch.tensor([[-1.0, 0.0, 0.0], [-2.0, 0.5, 0.0]], dtype=torch.float64)  # exp(1), exp(2) > C = 2
    mask = torch.tensor([[True, True, True], [True, True, False]])
    weights = tis_weights(old, rollout, mask)
    config = longcat_config(rows=2, t_max=3)
    _loss, metrics = get_policy_loss_fn("longcat")(
        old, old.clone(), torch.ones(2, 3, dtype=torch.float64), mask, "seq-mean-token-sum-norm", config, weights
    )
    assert metrics["actor/longcat/tis_capped_frac"] == 2 / 5
    expected_mean = (2.0 + 1.0 + 1.0 + 2.0 + math.exp(-0.5)) / 5
    assert abs(metrics["actor/longcat/tis_mean"] - expected_mean) < 1e-9


def test_scheduled_eps_pos_high_replaces_clip_ratio_high():
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    old = torch.zeros(1, 2, dtype=torch.float64)
    log_prob = torch.log(torch.tensor([[1.4, 1.1]], dtype=torch.float64))  # ratios 1.4 and 1.1
    mask = torch.ones(1, 2, dtype=torch.bool)
    config = longcat_config(rows=1, t_max=2)
    fn = get_policy_loss_fn("longcat")
    _loss, before = fn(
        old, log_prob, torch.ones(1, 2, dtype=torch.float64), mask, "seq-mean-token-sum-norm", config, None
    )
    config.policy_loss.eps_pos_high = 0.05
    _loss, after = fn(
        old, log_prob, torch.ones(1, 2, dtype=torch.float64), mask, "seq-mean-token-sum-norm", config, None
    )
    assert (before["actor/longcat/clipfrac_high"], after["actor/longcat/clipfrac_high"]) == (0.5, 1.0)
    assert after["actor/longcat/eps_pos_high"] == 0.05


@settings(max_examples=40, deadline=None)
@given(
    batch=batches(max_gap=3.0),
    tau=st.sampled_from([0.05, 0.1, 1.0]),
    drawn_rewards=st.lists(st.sampled_from([0.0, 0.25, 1.0]), min_size=5, max_size=5),
)
def test_kimi_mirror_descent_equals_its_equation(batch, tau, drawn_rewards):
    """One prompt's k samples (the rows); r − r̄ is what verl's GRPO gives without std norm."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    old, log_prob, _rollout, _advantages, mask = batch
    rows = old.shape[0]
    rewards = drawn_rewards[:rows]
    mean_reward = sum(rewards) / rows
    advantages = torch.tensor([r - mean_reward for r in rewards], dtype=torch.float64)[:, None].expand_as(old).clone()
    ours_input, reference_input = log_prob.clone().requires_grad_(True), log_prob.clone().requires_grad_(True)
    config = kimi_config(rows=rows, tau=tau)
    loss, metrics = get_policy_loss_fn("kimi_mirror_descent")(
        old, ours_input, advantages, mask, "seq-mean-token-sum", config, None
    )
    expected = kimi_sample_losses(reference_input, old, rewards, mask, tau)
    assert torch.allclose(loss, torch.as_tensor(expected, dtype=loss.dtype), atol=1e-6, rtol=1e-6)
    loss.backward()
    if torch.is_tensor(expected) and expected.requires_grad:
        expected.backward()
        assert torch.allclose(ours_input.grad, reference_input.grad, atol=1e-6, rtol=1e-6)
    assert metrics["actor/kimi/tau"] == tau
