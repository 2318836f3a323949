"""The merge rules against an independent implementation (tests/reference.py) on random tensors,
hand-worked cases (ties, all-zero task vectors) and DARE's expectation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from reasonrl.api import fuse_task_vectors
from reasonrl.plugins.merging.fusion import average_tensors, drop_masks, task_arithmetic_tensor
from reasonrl.plugins.merging.tests.reference import average_reference, fuse_reference, task_arithmetic_reference


def random_models(experts: int, seed: int, shapes=((5, 7), (11,), (3, 2, 4))):
    generator = torch.Generator().manual_seed(seed)
    base = {f"t{i}": torch.randn(shape, generator=generator, dtype=torch.float64) for i, shape in enumerate(shapes)}
    out = []
    for _ in range(experts):
        expert = {}
        for name, tensor in base.items():
            delta = torch.randn(tensor.shape, generator=generator, dtype=torch.float64)
            delta[torch.rand(tensor.shape, generator=generator) < 0.2] = 0.0  # some entries unchanged
            expert[name] = tensor + delta * float(torch.rand(1, generator=generator) * 3)
        out.append(expert)
    return base, out


@pytest.mark.parametrize(
    "normalize, drop_rate, erase, scale", list(itertools.product([True, False], [0.0, 0.4], [True, False], [1.0, 0.5]))
)
def test_fusion_equals_the_independent_implementation(normalize, drop_rate, erase, scale):
    base, experts = random_models(3, seed=7)
    assert_fusion_matches_reference(
        base, experts, normalize=normalize, drop_rate=drop_rate, erase=erase, seed=11, scale=scale
    )


def assert_fusion_matches_reference(base, experts, **knobs):
    """The facade against tests/reference.py, tensor by tensor; the drop exact for a fixed seed:
    the reference applies the documented masks (``drop_masks``)."""
    fused = fuse_task_vectors(base, experts, **knobs)
    drop_rate = knobs["drop_rate"]
    for name, tensor in base.items():
        masks = (
            [m.numpy() for m in drop_masks(tensor.shape, len(experts), drop_rate, knobs["seed"], name)]
            if drop_rate
            else None
        )
        expected = fuse_reference(
            tensor.numpy(),
            [e[name].numpy() for e in experts],
            normalize=knobs["normalize"],
            keep_masks=masks,
            drop_rate=drop_rate,
            erase=knobs["erase"],
            scale=knobs["scale"],
        )
        np.testing.assert_allclose(fused[name].numpy(), expected, rtol=1e-10, atol=1e-12)
        assert fused[name].dtype == tensor.dtype


def test_normalization_rescales_every_task_vector_to_the_mean_norm_zero_norms_included():
    base = {"w": torch.zeros(4, dtype=torch.float64)}
    experts = [{"w": torch.tensor([3.0, 4.0, 0, 0], dtype=torch.float64)}, {"w": torch.zeros(4, dtype=torch.float64)}]
    # norms 5 and 0: mean 2.5; the first τ becomes [1.5, 2, 0, 0], the zero τ stays zero (and does not vote)
    fused = fuse_task_vectors(base, experts, normalize=True, erase=True)
    assert torch.allclose(fused["w"], torch.tensor([1.5, 2.0, 0.0, 0.0], dtype=torch.float64))


def test_majority_sign_erasure_ties_and_all_zero_deltas():
    base = {"w": torch.zeros(5, dtype=torch.float64)}
    experts = [
        {"w": torch.tensor([2.0, 1.0, 1.0, 0.0, -3.0], dtype=torch.float64)},
        {"w": torch.tensor([-1.0, -1.0, 3.0, 0.0, 1.0], dtype=torch.float64)},
    ]
    fused = fuse_task_vectors(base, experts, normalize=False, erase=True)["w"]
    # entry 0: Σ = 1 > 0, only +2 survives; entry 1: Σ = 0 (a tie) → sign 0, nothing survives; entry 2:
    # both positive → mean 2; entry 3: all zero → 0; entry 4: Σ = −2, only −3 survives
    assert fused.tolist() == [2.0, 0.0, 2.0, 0.0, -3.0]
    no_erase = fuse_task_vectors(base, experts, normalize=False, erase=False)["w"]
    assert no_erase.tolist() == [0.5, 0.0, 2.0, 0.0, -1.0]  # mean over the non-zero entries
    zeros = fuse_task_vectors({"w": torch.ones(3)}, [{"w": torch.ones(3)}] * 3, normalize=True, drop_rate=0.5)
    assert torch.equal(zeros["w"], torch.ones(3)), "all-zero task vectors leave the base"


def test_drop_with_rescale_is_unbiased_in_expectation():
    base = {"w": torch.zeros(200, dtype=torch.float64)}
    tau = torch.linspace(-1, 1, 200, dtype=torch.float64)
    expert = [{"w": tau}]
    p, seeds = 0.6, 600
    mean = sum(
        fuse_task_vectors(base, expert, normalize=False, drop_rate=p, erase=False, seed=s)["w"] for s in range(seeds)
    )
    mean = mean / seeds
    # per entry: τ · Bernoulli(1 − p) / (1 − p), standard error |τ| sqrt(p / (1 − p) / seeds)
    bound = 5 * tau.abs() * (p / (1 - p) / seeds) ** 0.5 + 1e-12
    assert torch.all((mean - tau).abs() <= bound)
    one = fuse_task_vectors(base, expert, normalize=False, drop_rate=p, erase=False, seed=3)["w"]
    kept = one != 0
    assert 0.3 < kept.double().mean() < 0.5  # ~1 − p kept
    assert torch.allclose(one[kept], tau[kept] / (1 - p))
    again = fuse_task_vectors(base, expert, normalize=False, drop_rate=p, erase=False, seed=3)["w"]
    assert torch.equal(one, again), "seeded and reproducible"


def test_average_and_task_arithmetic_equal_the_independent_implementation():
    base, experts = random_models(3, seed=2)
    for name, tensor in base.items():
        models = [tensor, *(e[name] for e in experts)]
        np.testing.assert_allclose(
            average_tensors(models, [1.0, 2.0, 0.5, 0.5]).numpy(),
            average_reference([m.numpy() for m in models], [1.0, 2.0, 0.5, 0.5]),
            rtol=1e-12,
        )
        np.testing.assert_allclose(
            task_arithmetic_tensor(tensor, [e[name] for e in experts], 0.3).numpy(),
            task_arithmetic_reference(tensor.numpy(), [e[name].numpy() for e in experts], 0.3),
            rtol=1e-12,
            atol=1e-12,
        )


def test_bad_inputs_name_what_is_wrong():
    base, experts = random_models(2, seed=1)
    for rate in (1.0, -0.1):
        with pytest.raises(ValueError, match="drop_rate"):
            fuse_task_vectors(base, experts, drop_rate=rate)
    with pytest.raises(ValueError, match=r"experts\[1\].*'t0'"):
        fuse_task_vectors(base, [experts[0], {**experts[1], "t0": torch.zeros(2)}])
    with pytest.raises(ValueError, match=r"experts\[0\]: tensor names differ"):
        fuse_task_vectors(base, [{"other": torch.zeros(1)}])


@pytest.mark.parametrize("drop_rate", [0.0, 0.4])
def test_chunked_rules_equal_the_independent_implementation(monkeypatch, drop_rate):
    """Tensors larger than one chunk (the chunk shrunk to 7 entries): normalization's norms span
    chunks, the drop masks are drawn per chunk, steps 2–4 run per chunk — same result."""
    from reasonrl.plugins.merging import fusion

    monkeypatch.setattr(fusion, "CHUNK", 7)
    base, experts = random_models(3, seed=4, shapes=((9, 8), (23,), (1,)))
    assert_fusion_matches_reference(base, experts, normalize=True, drop_rate=drop_rate, erase=True, seed=2, scale=0.7)
    models = [base["t0"], *(e["t0"] for e in experts)]
    np.testing.assert_allclose(
        average_tensors(models, [1, 2, 3, 4]).numpy(), average_reference([m.numpy() for m in models], [1, 2, 3, 4])
    )
