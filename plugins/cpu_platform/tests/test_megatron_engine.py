"""The CPU Megatron engine's pieces that run without a launch (the launches:
integration_tests/cpu_platform/test_megatron_cpu.py)."""

from __future__ import annotations

import pytest
import torch

from reasonrl.patches.cpu_platform.megatron_host_device import HostTorch, clip_grad_by_total_norm_fp32
from reasonrl.plugins.cpu_platform.megatron_engine import padding_mask_to_causal


def test_padding_mask_becomes_megatrons_causal_mask():
    valid = torch.tensor([[True, True, True, False], [True, True, False, False]])
    mask = padding_mask_to_causal(valid)
    assert mask.shape == (2, 1, 4, 4) and mask.dtype == torch.bool
    for row in range(2):
        for query in range(4):
            for key in range(4):
                attends = key <= query and bool(valid[row, key])
                assert bool(mask[row, 0, query, key]) is (not attends)


def test_host_torch_maps_cuda_to_the_host_and_nothing_else():
    host = HostTorch()
    assert host.zeros(2, device="cuda").device.type == "cpu"
    assert host.tensor([1.0], device=torch.device("cuda", 0)).device.type == "cpu"
    assert host.empty(1, device=host.cuda.current_device()).device.type == "cpu"
    assert host.cuda.synchronize() is None
    assert host.float32 is torch.float32 and host.nn is torch.nn  # the rest is torch's own


def test_clipping_scales_gradients_as_megatron_does():
    grads = [torch.tensor([3.0, 4.0]), torch.tensor([12.0])]
    params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
    for param, grad in zip(params, grads):
        param.grad = grad.clone()
    clip_grad_by_total_norm_fp32(params, max_norm=1.0, total_norm=13.0)
    for param, grad in zip(params, grads):
        torch.testing.assert_close(param.grad, grad * (1.0 / (13.0 + 1e-6)))
    clip_grad_by_total_norm_fp32(params, max_norm=100.0, total_norm=1.0)  # below the norm: unchanged
    torch.testing.assert_close(params[1].grad, grads[1] / (13.0 + 1e-6))


def test_float32_megatron_config_is_accepted_on_the_cpu_platform_only(monkeypatch):
    from reasonrl.patches.cpu_platform.verl_megatron_fp32 import PATCH
    from reasonrl.patching import apply_patch

    apply_patch(PATCH)
    from verl.workers.config.engine import McoreEngineConfig

    monkeypatch.setenv("VERL_PLATFORM", "cpu")
    assert McoreEngineConfig(dtype="float32").dtype == "float32"
    monkeypatch.delenv("VERL_PLATFORM")
    with pytest.raises(AssertionError, match="float32 not supported"):
        McoreEngineConfig(dtype="float32")
