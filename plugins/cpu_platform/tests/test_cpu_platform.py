"""The CPU platform keeps verl's PlatformBase interface and never hijacks auto-detection."""

from __future__ import annotations

import torch

from reasonrl.testing.fresh_process import python_fresh


def test_platform_implements_every_abstract_method():
    from reasonrl.plugins.cpu_platform.verl_platform import PlatformCPU

    platform = PlatformCPU()  # raises TypeError if an abstract method is missing
    assert (platform.device_name, platform.communication_backend_name(), platform.device_count()) == ("cpu", "gloo", 1)
    assert platform.ray_resource_options(1) == {"num_gpus": 1}
    assert platform.device_module.__name__ == "reasonrl_cpu_device" and platform.cudart() is None
    assert platform.current_device() == torch.device("cpu"), (
        "verl passes it to tensor.to(); a bare 0 means an accelerator"
    )
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


def test_device_module_answers_verls_cuda_style_calls():
    from reasonrl.plugins.cpu_platform.device_module import CPU_DEVICE_MODULE as device

    before = device.max_memory_allocated()
    held = torch.ones(64, 1024, 1024)  # 256 MiB, touched
    assert device.memory_allocated() > 200 * 2**20 and device.max_memory_allocated() >= before
    free, total = device.mem_get_info()
    assert 0 < free <= total
    del held
    state = device.get_rng_state()
    first = torch.rand(2)
    device.set_rng_state(state)
    assert torch.equal(first, torch.rand(2))
    device.empty_cache(), device.ipc_collect(), device.reset_peak_memory_stats()
    assert device.is_available is torch.cpu.is_available, "everything else is torch.cpu's own"
    assert device.get_device_properties().total_memory == total


def test_fsdp_engines_register_for_the_cpu_device():
    code = (
        "import os\n"
        "import verl\n"
        "from verl.workers.engine.base import EngineRegistry\n"
        "from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead\n"
        "print(EngineRegistry._engines['language_model']['fsdp2']['cpu'] is FSDPEngineWithLMHead)"
    )
    result = python_fresh(code, env={"VERL_PLATFORM": "cpu"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "True"
