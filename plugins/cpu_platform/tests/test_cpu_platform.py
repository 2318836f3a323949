"""The CPU platform keeps verl's PlatformBase interface and never hijacks auto-detection."""

from __future__ import annotations

import torch

from reasonrl.testing.fresh_process import python_fresh


def test_platform_implements_every_abstract_method():
    from reasonrl.plugins.cpu_platform.verl_platform import PlatformCPU

    platform = PlatformCPU()  # raises TypeError if an abstract method is missing
    assert (platform.device_name, platform.communication_backend_name(), platform.device_count()) == ("cpu", "gloo", 1)
    assert platform.ray_resource_options(1) == {"num_gpus": 1}
    assert platform.device_module is torch.cpu and platform.cudart() is None
    with platform.nvtx_range("noop"):
        pass


def test_manual_seed_makes_cpu_draws_repeatable():
    from reasonrl.plugins.cpu_platform.verl_platform import PlatformCPU

    platform = PlatformCPU()
    platform.manual_seed(7)
    first = torch.rand(3)
    platform.manual_seed_all(7)
    assert torch.equal(first, torch.rand(3))


def test_register_is_idempotent():
    from verl.plugin.platform import PlatformRegistry

    from reasonrl.plugins.cpu_platform.verl_platform import PlatformCPU, register

    register("cpu")
    register("cpu")
    assert PlatformRegistry.get("cpu") is PlatformCPU


def test_not_selected_without_explicit_env():
    code = "import verl\nfrom verl.plugin.platform.platform_manager import _detect_platform_name\nprint(_detect_platform_name())"
    result = python_fresh(code, env={"VERL_PLATFORM": ""})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] != "cpu"
