"""Kimi k1.5 §2.3.2: the optimizer is reset at the start of every iteration."""

from __future__ import annotations

import pytest
import torch

from reasonrl.plugins.objectives.optimizer import IterationResetAdamW, updates_per_iteration


def _gradients(iterations: int, per_iteration: int, size: int = 5):
    generator = torch.Generator().manual_seed(0)
    return [[torch.randn(size, generator=generator) for _ in range(per_iteration)] for _ in range(iterations)]


def test_matches_a_fresh_adamw_every_iteration():
    grads = _gradients(iterations=3, per_iteration=2)
    start = torch.linspace(-1, 1, 5)
    ours = torch.nn.Parameter(start.clone())
    optimizer = IterationResetAdamW([ours], updates_per_iteration=2, lr=0.1, betas=(0.9, 0.99), weight_decay=0.01)
    reference = torch.nn.Parameter(start.clone())
    for iteration in grads:
        fresh = torch.optim.AdamW([reference], lr=0.1, betas=(0.9, 0.99), weight_decay=0.01)  # Kimi's reset
        for grad in iteration:
            for parameter, opt in ((ours, optimizer), (reference, fresh)):
                parameter.grad = grad.clone()
                opt.step()
        torch.testing.assert_close(ours.detach(), reference.detach(), rtol=0, atol=0)
    assert optimizer.resets == 2 and optimizer.updates_since_reset() == 2


def test_differs_from_plain_adamw():
    """The reset changes the trajectory (else the test above would prove nothing)."""
    grads = [g for iteration in _gradients(iterations=2, per_iteration=2) for g in iteration]
    ours, plain = torch.nn.Parameter(torch.zeros(5)), torch.nn.Parameter(torch.zeros(5))
    a, b = IterationResetAdamW([ours], updates_per_iteration=2, lr=0.1), torch.optim.AdamW([plain], lr=0.1)
    for grad in grads:
        for parameter, opt in ((ours, a), (plain, b)):
            parameter.grad = grad.clone()
            opt.step()
    assert not torch.allclose(ours, plain)


def test_reset_lands_on_the_same_step_after_a_checkpoint_restore():
    grads = [g for iteration in _gradients(iterations=3, per_iteration=3) for g in iteration]
    straight = torch.nn.Parameter(torch.zeros(5))
    opt = IterationResetAdamW([straight], updates_per_iteration=3, lr=0.05)
    for grad in grads:
        straight.grad = grad.clone()
        opt.step()
    resumed = torch.nn.Parameter(torch.zeros(5))
    first = IterationResetAdamW([resumed], updates_per_iteration=3, lr=0.05)
    for grad in grads[:4]:  # stop inside the second iteration
        resumed.grad = grad.clone()
        first.step()
    second = IterationResetAdamW([resumed], updates_per_iteration=3, lr=0.05)
    second.load_state_dict(first.state_dict())
    for grad in grads[4:]:
        resumed.grad = grad.clone()
        second.step()
    torch.testing.assert_close(resumed.detach(), straight.detach(), rtol=0, atol=0)


def test_updates_per_iteration():
    assert updates_per_iteration(512, 32, 1) == 16 and updates_per_iteration(16, 8, 2) == 4
    with pytest.raises(ValueError, match="not a multiple"):
        updates_per_iteration(10, 4)
    with pytest.raises(ValueError, match=">= 1"):
        IterationResetAdamW([torch.nn.Parameter(torch.zeros(1))], updates_per_iteration=0)


def test_a_built_optimizer_resets_like_iteration_reset_adamw():
    """verl's Megatron engine builds megatron-core's optimizer itself (torch AdamW inside): the reset
    added afterwards gives the same parameters as IterationResetAdamW."""
    from reasonrl.plugins.objectives.optimizer import reset_each_iteration

    grads = _gradients(iterations=3, per_iteration=2)
    start = torch.linspace(-1, 1, 5)
    built, ours = torch.nn.Parameter(start.clone()), torch.nn.Parameter(start.clone())
    made_elsewhere = reset_each_iteration(torch.optim.AdamW([built], lr=0.1, weight_decay=0.01), 2)
    reference = IterationResetAdamW([ours], updates_per_iteration=2, lr=0.1, weight_decay=0.01)
    for grad in (g for iteration in grads for g in iteration):
        for parameter, opt in ((built, made_elsewhere), (ours, reference)):
            parameter.grad = grad.clone()
            opt.step()
    torch.testing.assert_close(built.detach(), ours.detach(), rtol=0, atol=0)
    assert isinstance(made_elsewhere, torch.optim.AdamW) and made_elsewhere.resets == reference.resets == 2


def test_the_reset_config_follows_the_actor_engine():
    """One option file asks for the reset on both engines: FSDP's config class keeps verl's class
    path; on Megatron the plugin's config carries it and megatron-core builds its adam."""
    from verl.utils.config import omega_conf_to_dataclass
    from verl.utils.megatron.optimizer import init_megatron_optim_config

    from reasonrl.cli.train import compose_config, resolve_in_driver
    from reasonrl.plugins.objectives.megatron_optim_config import ResettingMcoreOptimizerConfig
    from reasonrl.plugins.objectives.optimizer import optimizer_config_class
    from reasonrl.plugins.objectives.verl_megatron_optimizer import resetting_optimizer_config

    config = compose_config(["recipe=kimi_k15", "+preset=cpu_tiny_megatron"])
    resolve_in_driver(config)
    optim = omega_conf_to_dataclass(config.actor_rollout_ref.actor.optim)
    assert isinstance(optim, ResettingMcoreOptimizerConfig)
    view, updates = resetting_optimizer_config(optim)
    assert updates == 2  # 16 prompts / 8 per update, one epoch
    megatron = init_megatron_optim_config(view, use_distributed_optimizer=False, fp16=False, bf16=False)
    assert (megatron.optimizer, megatron.lr, megatron.weight_decay) == ("adam", optim.lr, optim.weight_decay)
    plain = omega_conf_to_dataclass(
        compose_config(["recipe=longcat", "+preset=cpu_tiny_megatron"]).actor_rollout_ref.actor.optim
    )
    assert resetting_optimizer_config(plain) is None  # other recipes: verl's build, untouched
    with pytest.raises(ValueError, match="FSDP and Megatron engines"):
        optimizer_config_class("veomni")
