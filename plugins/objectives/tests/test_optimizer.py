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
