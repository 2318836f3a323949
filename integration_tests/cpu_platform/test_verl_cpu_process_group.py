"""The ``verl-cpu-process-group`` patch: verl's workers get a plain gloo process group on
the cpu platform (verl would ask torch for the invalid ``cpu:gloo,cpu:gloo``)."""

from __future__ import annotations

import pytest

from reasonrl.testing.fresh_process import python_fresh

pytestmark = pytest.mark.integration

# As verl's engine workers do it: the name bound by `from ... import` at their import time.
INIT_AS_VERLS_WORKERS_DO = """
import os, socket
probe = socket.socket(); probe.bind(("127.0.0.1", 0)); port = probe.getsockname()[1]; probe.close()
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
import verl
from verl.workers.engine_workers import initialize_global_process_group_ray
initialize_global_process_group_ray(timeout_second=None)
import torch.distributed as dist
print(getattr(initialize_global_process_group_ray, "__reasonrl_patch__", None), dist.get_backend())
"""


def test_cpu_platform_workers_get_a_gloo_group():
    result = python_fresh(INIT_AS_VERLS_WORKERS_DO, env={"VERL_PLATFORM": "cpu"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "verl-cpu-process-group gloo"


def test_without_the_patch_torch_rejects_verls_backend_string():
    result = python_fresh(
        INIT_AS_VERLS_WORKERS_DO, env={"VERL_PLATFORM": "cpu", "REASONRL_DISABLE_PATCHES": "verl-cpu-process-group"}
    )
    assert result.returncode != 0 and "cpu:gloo,cpu:gloo" in result.stderr


# As verl's torchrun entry points do it (verl.trainer.sft_trainer.run_sft).
INIT_AS_VERLS_TORCHRUN_ENTRIES_DO = """
import os, socket
probe = socket.socket(); probe.bind(("127.0.0.1", 0)); port = probe.getsockname()[1]; probe.close()
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
import verl
from verl.utils.distributed import initialize_global_process_group
print(initialize_global_process_group())
import torch.distributed as dist
print(getattr(initialize_global_process_group, "__reasonrl_patch__", None), dist.get_backend())
"""


def test_torchrun_entry_points_get_a_gloo_group_too():
    result = python_fresh(INIT_AS_VERLS_TORCHRUN_ENTRIES_DO, env={"VERL_PLATFORM": "cpu"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-2:] == ["(0, 0, 1)", "verl-cpu-process-group gloo"]
    unpatched = python_fresh(
        INIT_AS_VERLS_TORCHRUN_ENTRIES_DO,
        env={"VERL_PLATFORM": "cpu", "REASONRL_DISABLE_PATCHES": "verl-cpu-process-group"},
    )
    assert unpatched.returncode != 0 and "cpu:gloo,cpu:gloo" in unpatched.stderr
