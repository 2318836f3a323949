"""RPO's loss against its equation, computed independently (torch.distributions' Bernoulli KL),
and the direction it moves the policy."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonrl.plugins.model_rewards.rpo import rpo_loss

#: |a|, |b| <= 28: torch's Bernoulli KL works in probabilities, which round to 1 past |logit| ~ 37
floats = st.floats(-3.5, 3.5, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(
    pc=floats,
    pr=floats,
    rc=floats,
    rr=floats,
    gc=st.floats(-5, 5),
    gr=st.floats(-5, 5),
    beta=st.floats(0.01, 2.0),
    eta=st.floats(0.0, 5.0),
)
def test_bernoulli_kl_matches_torch_distributions(pc, pr, rc, rr, gc, gr, beta, eta):
    t = lambda x: torch.tensor([x], dtype=torch.float64)  # noqa: E731
    loss, margin = rpo_loss(t(pc), t(pr), t(rc), t(rr), t(gc), t(gr), beta=beta, eta=eta)
    a = beta * ((pc - rc) - (pr - rr))
    b = eta * (gc - gr)
    expected = torch.distributions.kl_divergence(
        torch.distributions.Bernoulli(logits=t(b)), torch.distributions.Bernoulli(logits=t(a))
    )
    assert margin.item() == pytest.approx(a, rel=1e-9, abs=1e-9)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6, abs=1e-9)
    assert loss.item() >= -1e-12


def test_finite_where_probabilities_saturate():
    z = torch.zeros(1, dtype=torch.float64)
    # a = 38, b = 0: KL(Bern(1/2) || Bern(σ(38))) = ½ log(½/σ(38)) + ½ log(½/σ(−38)) = 19 − log 2 (to 1e-16)
    loss, _ = rpo_loss(torch.tensor([38.0], dtype=torch.float64), z, z, z, z, z, beta=1.0, eta=1.0)
    assert loss.item() == pytest.approx(19 - math.log(2), rel=1e-12)


def test_squared_distance_and_zero_at_the_target():
    z = torch.zeros(1, dtype=torch.float64)
    # margin a = 0.5 * (2 - 0) = 1; target b = 2 * (0.75 - 0.25) = 1: both distances vanish
    for distance in ("bernoulli_kl", "squared"):
        loss, _ = rpo_loss(torch.tensor([2.0]), z, z, z, torch.tensor([0.75]), torch.tensor([0.25]), 0.5, 2.0, distance)
        assert loss.item() == pytest.approx(0.0, abs=1e-7)
    loss, _ = rpo_loss(z, z, z, z, torch.tensor([1.0]), z, 1.0, 3.0, "squared")
    assert loss.item() == pytest.approx(9.0)
    with pytest.raises(ValueError, match="distance"):
        rpo_loss(z, z, z, z, z, z, distance="l1")


def test_the_gradient_raises_the_chosen_until_the_margin_matches_the_gap():
    chosen = torch.zeros(2, requires_grad=True)
    rejected = torch.zeros(2)
    gaps = torch.tensor([2.0, 0.1])  # a clear win, and a near tie
    loss, _ = rpo_loss(chosen, rejected, torch.zeros(2), torch.zeros(2), gaps, torch.zeros(2), beta=1.0, eta=1.0)
    loss.sum().backward()
    assert (chosen.grad < 0).all(), "descending the loss raises the chosen responses' log-probs"
    assert chosen.grad[0].abs() > 5 * chosen.grad[1].abs(), "a larger reward gap pushes harder"
    over = torch.tensor([5.0, 5.0], requires_grad=True)  # margin past the gap: pushed back down
    loss, _ = rpo_loss(over, rejected, torch.zeros(2), torch.zeros(2), gaps, torch.zeros(2), beta=1.0, eta=1.0)
    loss.sum().backward()
    assert (over.grad > 0).all()
