"""What a GPU user gets from reasonrl with verl installed as verl pins it (verl[vllm]==0.9.1:
vLLM 0.24.0, torch 2.11 CUDA, transformers 5.9.0), checked without a GPU: registrations, every
plugin and patch with its status (none failed or refused, each one not applied says why), the
four recipes through verl's own validation with GPU settings, the MTP drafter's behaviour on
vLLM 0.24, and what of vLLM 0.24 can be exercised on a CPU host. Fresh processes, as verl's
driver, Ray workers and vLLM engines would run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version

import pytest

pytestmark = pytest.mark.integration
RECIPES = ["mimo", "kimi_k15", "longcat", "nemotron"]


def run_python(code: str, **env: str) -> str:
    environment = {key: value for key, value in os.environ.items() if key != "REASONRL_MTP_DRAFTER"}
    environment.update(env)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=environment)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def result_of(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, stdout[-2000:]
    return json.loads(lines[-1][len("RESULT ") :])


def test_the_stack_is_verls_gpu_pins():
    assert version("verl") == "0.9.1" and version("vllm") == "0.24.0"
    assert version("torch").startswith("2.11.0") and version("transformers") == "5.9.0"


def test_import_verl_applies_reasonrls_registrations():
    result = result_of(
        run_python(
            "import json, verl\n"
            "from reasonrl.bridges import STATUS\nfrom reasonrl.manager import load_errors\n"
            "s = STATUS['verl']\n"
            "print('RESULT', json.dumps({'ran': s.ran, 'applied': [r.name for _, r in s.applied], 'failed': [r.name for _, r in s.failed],"
            " 'patches': s.patches, 'errors': [e.error for e in load_errors()]}))"
        )
    )
    assert result["ran"] and result["failed"] == [] and result["errors"] == [], result
    assert {"longcat", "kimi_mirror_descent", "reasonrl", "masked_grpo", "cpu", "mimo"} <= set(result["applied"]), (
        result
    )
    assert result["patches"] == {"verl-cpu-process-group": "applied"}


def test_plugins_report_lists_every_plugin_and_patch_with_a_status():
    done = subprocess.run(
        [sys.executable, "-m", "reasonrl.cli.main", "plugins", "--check", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert {"cpu_platform", "objectives", "rewards", "sampling", "puzzle", "mtp", "patches"} <= set(report["plugins"])
    assert report["errors"] == []
    patches = {patch["name"]: patch for patch in report["patches"]}
    assert len(patches) == 5
    for patch in patches.values():
        assert patch["status"] in ("applied", "would-apply", "not-applicable"), patch
        if patch["status"] == "not-applicable":
            assert patch["reason"], patch
    assert patches["verl-cpu-process-group"]["status"] == "applied"
    for name in ("vllm-cpu-updatable-weights", "vllm-cpu-spec-decode-expand"):
        assert patches[name]["status"] == "not-applicable" and "not its CPU build" in patches[name]["reason"]
    assert patches["vllm-mtp-first-pass"]["status"] == "not-applicable"  # reasonrl's MTP drafting off in this process
    # vLLM 0.24 still takes verl's wait_for_inflight_requests: the abort-path patch is not needed
    assert patches["vllm-pause-generation-mode"]["status"] == "not-applicable", patches["vllm-pause-generation-mode"]
    assert "0.24" in patches["vllm-pause-generation-mode"]["reason"]
    drafter = [r for r in report["plugins"]["mtp"]["registrations"] if r["name"] == "MiMoMTPModel"]
    assert drafter[0]["state"] == "not-applicable" and drafter[0]["reason"], drafter
    internals = {row["name"]: row["state"] for row in report["upstream_internals"]}
    assert set(internals.values()) == {"supported"}, internals


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipes_pass_verls_validation_with_gpu_settings(recipe):
    result = result_of(
        run_python(
            "import json\nfrom reasonrl.cli.train import compose_config, check_upstream_versions\n"
            "from reasonrl.api import validate_config as validate_reasonrl\n"
            "from verl.utils.config import validate_config\n"
            "from verl.trainer.ppo.utils import need_critic, need_reference_policy\n"
            f"config = compose_config(['recipe={recipe}'])\n"
            "validate_reasonrl(config); check_upstream_versions(config)\n"
            "validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))\n"
            "print('RESULT', json.dumps({'device': config.trainer.device, 'rollout': config.actor_rollout_ref.rollout.name,"
            " 'env': dict(config.ray_kwargs.ray_init.get('runtime_env', {}).get('env_vars', {}) or {})}))"
        )
    )
    assert result["device"] == "cuda" and result["rollout"] == "vllm", result
    assert "VERL_PLATFORM" not in result["env"], result  # no CPU preset


MAKE_CHECKPOINT = """
import sys, torch
from transformers import Qwen2Config, Qwen2ForCausalLM
from reasonrl.plugins.mtp.hf_model import to_mimo
torch.manual_seed(0)
config = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=False)
to_mimo(Qwen2ForCausalLM(config), 3).save_pretrained(sys.argv[1], safe_serialization=True)
"""

# vLLM 0.24's GPU build on a host without a GPU: its platform knows no device, so the probe names
# the device (cpu) and an attention backend itself. Only construction and weight loading run here.
BUILD_DRAFTER = """
import copy, glob, json, sys, torch
from safetensors.torch import load_file
from vllm.plugins import load_general_plugins
load_general_plugins()  # reasonrl's bridge: MiMo config, the drafter (REASONRL_MTP_DRAFTER set), patches
from vllm.config import AttentionConfig, DeviceConfig, ModelConfig, ParallelConfig, SpeculativeConfig, VllmConfig, set_current_vllm_config
from vllm.distributed import init_distributed_environment, initialize_model_parallel
from vllm.model_executor.models.registry import ModelRegistry
from vllm.platforms import current_platform
from vllm.v1.attention.backends.registry import AttentionBackendEnum
from reasonrl.bridges import STATUS
path = sys.argv[1]
device = DeviceConfig(device="cpu")
with set_current_vllm_config(VllmConfig(device_config=device)):
    init_distributed_environment(world_size=1, rank=0, local_rank=0, distributed_init_method="tcp://127.0.0.1:29731", backend="gloo")
    initialize_model_parallel(1, 1)
target = ModelConfig(model=path, dtype="float32", skip_tokenizer_init=True, enforce_eager=True, max_model_len=128)
speculative = SpeculativeConfig(method="mtp", num_speculative_tokens=3, target_model_config=target, target_parallel_config=ParallelConfig())
config = VllmConfig(model_config=target, speculative_config=speculative, device_config=device,
                    attention_config=AttentionConfig(backend=AttentionBackendEnum.FLEX_ATTENTION))
type(current_platform).get_attn_backend_cls = classmethod(lambda cls, *a, **k: AttentionBackendEnum.FLEX_ATTENTION.get_path())
draft = copy.copy(config)
draft.model_config = speculative.draft_model_config
drafter_class = ModelRegistry._try_load_model_cls(draft.model_config.hf_config.architectures[0])
with set_current_vllm_config(config), torch.device("cpu"):
    drafter = drafter_class(vllm_config=draft, prefix="")
state = {}
for shard in sorted(glob.glob(path + "/*.safetensors")):
    state.update(load_file(shard))
loaded = drafter.load_weights(iter(state.items()))
parameters = dict(drafter.named_parameters())
layer = lambda k, part: state[f"model.mtp_layers.{k}.{part}.weight"]
print("RESULT", json.dumps({
    "architecture": draft.model_config.hf_config.architectures[0], "class": f"{drafter_class.__module__}.{drafter_class.__name__}",
    "patches": STATUS["vllm"].patches, "depth": drafter.depth, "missing": sorted(set(parameters) - loaded),
    "qkv": all(torch.equal(parameters[f"model.mtp_layers.{k}.mtp_block.self_attn.qkv_proj.weight"],
                           torch.cat([layer(k, "self_attn.q_proj"), layer(k, "self_attn.k_proj"), layer(k, "self_attn.v_proj")])) for k in range(3)),
    "gate_up": all(torch.equal(parameters[f"model.mtp_layers.{k}.mtp_block.mlp.gate_up_proj.weight"],
                               torch.cat([layer(k, "mlp.gate_proj"), layer(k, "mlp.up_proj")])) for k in range(3)),
    "input_proj": torch.equal(parameters["model.mtp_layers.2.input_proj.weight"], layer(2, "input_proj")),
}))
"""


def test_the_multi_layer_drafter_registers_and_loads_on_vllm_0_24(tmp_path):
    """verl's MTP config resolves a MiMo checkpoint to vLLM's MiMoMTPModel; with reasonrl's drafting
    on, that name is reasonrl's drafter, its first-pass patch applies, and a 3-layer checkpoint's
    weights land in it (stacked q/k/v and gate/up included). Its forward needs a GPU: not run."""
    run_python(MAKE_CHECKPOINT.replace("sys.argv[1]", repr(str(tmp_path))))
    result = result_of(
        run_python(BUILD_DRAFTER.replace("sys.argv[1]", repr(str(tmp_path))), REASONRL_MTP_DRAFTER="multi_layer=True")
    )
    assert result["architecture"] == "MiMoMTPModel"
    assert result["class"] == "reasonrl.plugins.mtp.vllm_drafter.MiMoMultiLayerMTP", result
    assert result["patches"]["vllm-mtp-first-pass"] == "applied", result
    assert result["depth"] == 3 and result["missing"] == [], result
    assert result["qkv"] and result["gate_up"] and result["input_proj"], result


def test_plain_vllm_0_24_keeps_its_own_mimo_drafter():
    probe = (
        "import json\nfrom vllm.plugins import load_general_plugins\nload_general_plugins()\n"
        "from vllm import ModelRegistry\nfrom reasonrl.bridges import STATUS\nfrom reasonrl.patching import patch_reason\n"
        "print('RESULT', json.dumps({'module': ModelRegistry.models['MiMoMTPModel'].module_name, 'patches': STATUS['vllm'].patches,"
        " 'first_pass': patch_reason('vllm-mtp-first-pass')}))"
    )
    result = result_of(run_python(probe))
    assert result["module"] == "vllm.model_executor.models.mimo_mtp", result
    assert (
        set(result["patches"].values()) == {"not-applicable"} and "REASONRL_MTP_DRAFTER unset" in result["first_pass"]
    ), result


def test_what_vllm_0_24_offers_without_a_gpu():
    result = result_of(
        run_python(
            "import inspect, json\nimport vllm\nfrom vllm import SamplingParams\n"
            "from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer\n"
            "params = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=8, logprobs=0)\n"
            "print('RESULT', json.dumps({'version': vllm.__version__, 'max_tokens': params.max_tokens,"
            " 'first_pass_parameters': list(inspect.signature(SpecDecodeBaseProposer.set_inputs_first_pass).parameters)}))"
        )
    )
    assert result["version"] == "0.24.0" and result["max_tokens"] == 8
    # the method the first-pass patch wraps, with the parameters it has in 0.32
    assert result["first_pass_parameters"] == [
        "self",
        "target_token_ids",
        "next_token_ids",
        "target_positions",
        "target_hidden_states",
        "token_indices_to_sample",
        "cad",
        "num_rejected_tokens_gpu",
    ], result


def test_rollout_repeat_detection_builds_vllm_024s_sampling_parameter():
    """The rollout plugin's request transform asks vLLM 0.24 for repeat detection with the same
    parameter class and finish reason as on vLLM 0.32 (run on CPU: nothing is generated)."""
    from vllm import SamplingParams
    from vllm.v1.engine import FINISH_REASON_STRINGS

    from reasonrl.plugins.rollout.config import REPETITION, RolloutConfig
    from reasonrl.plugins.rollout.verl_request import repetition_sampling_params

    extra = repetition_sampling_params(RolloutConfig(repetition_max_pattern=64, repetition_min_count=8))
    params = SamplingParams(max_tokens=16, **extra)
    assert params.repetition_detection.max_pattern_size == 64 and params.repetition_detection.min_count == 8
    assert REPETITION in FINISH_REASON_STRINGS
    assert repetition_sampling_params(RolloutConfig()) == {}
