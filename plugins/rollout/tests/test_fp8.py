"""FP8 generation (Llama-Nemotron §5.2.3): the AMX check, the start-up refusal, verl's block FP8
at weight sync (round trip, idempotence, scales), the option file, the trainer-vs-engine gap."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from reasonrl.config import ConfigError
from reasonrl.plugins.rollout import fp8

KEY = "actor_rollout_ref.rollout.quantization"

SAPPHIRE_RAPIDS = (
    "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
    "flags\t\t: fpu vme sse2 avx2 avx512f avx512_bf16 amx_bf16 avx512_fp16 amx_tile amx_int8\n\n"
    "processor\t: 1\nflags\t\t: fpu vme sse2 avx2 avx512f avx512_bf16 amx_bf16 avx512_fp16 amx_tile amx_int8\n"
)
ICE_LAKE = "processor\t: 0\nflags\t\t: fpu vme sse2 avx2 avx512f avx512_vnni\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics\nCPU implementer\t: 0x41\n"


# --- AMX detection ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        (SAPPHIRE_RAPIDS, True),
        (ICE_LAKE, False),
        (ARM, False),  # no flags line at all
        ("", False),
        ("flags\t: amx_tile amx_int8\n", False),  # int8 tiles only: no bf16 BRGEMM
        ("flags\t: amx_bf16 avx512f\n", False),  # no tile flag
        ("flags\t: avx2 amx_tile\nflags\t: amx_bf16\n", False),  # flags split over two CPUs
        (SAPPHIRE_RAPIDS + ICE_LAKE, False),  # one CPU without AMX
        ("flags : amx_tile amx_bf16\n", True),
        ("cpu flags\t: amx_tile amx_bf16\n", False),  # not the flags field
    ],
)
def test_cpu_has_amx_on_crafted_cpuinfo(text, expected):
    assert fp8.cpu_has_amx(text) is expected


def test_cpu_has_amx_reads_this_machines_cpuinfo():
    path = Path("/proc/cpuinfo")
    if not path.exists():
        assert fp8.cpu_has_amx() is False
        return
    assert fp8.cpu_has_amx() is fp8.cpu_has_amx(path.read_text())


# --- the start-up check -------------------------------------------------------------------

CPU_SIGNALS = [
    ({"trainer": {"device": "cpu"}}, {}),
    ({"ray_kwargs": {"ray_init": {"runtime_env": {"env_vars": {"VERL_PLATFORM": "cpu"}}}}}, {}),
    ({}, {"VERL_PLATFORM": "cpu"}),
]


def with_fp8(extra: dict, quantization="fp8", engine="vllm") -> dict:
    return {"actor_rollout_ref": {"rollout": {"quantization": quantization, "name": engine}}, **extra}


@pytest.mark.parametrize("extra, environ", CPU_SIGNALS)
def test_check_fp8_refuses_a_cpu_platform_without_amx_naming_the_key(extra, environ):
    with pytest.raises(ConfigError) as raised:
        fp8.check_fp8(with_fp8(extra), cpuinfo=ICE_LAKE, environ=environ)
    assert raised.value.key == KEY
    assert "AMX" in str(raised.value) and KEY in str(raised.value)


@pytest.mark.parametrize("extra, environ", CPU_SIGNALS)
def test_check_fp8_accepts_a_cpu_platform_with_amx(extra, environ):
    fp8.check_fp8(with_fp8(extra), cpuinfo=SAPPHIRE_RAPIDS, environ=environ)


def test_check_fp8_accepts_off_cpu_and_ignores_runs_without_fp8():
    fp8.check_fp8(with_fp8({"trainer": {"device": "cuda"}}), cpuinfo=ICE_LAKE, environ={"VERL_PLATFORM": "cuda"})
    fp8.check_fp8(with_fp8({}), cpuinfo=ICE_LAKE, environ={})
    for quantization in (None, "torchao"):
        fp8.check_fp8(with_fp8({"trainer": {"device": "cpu"}}, quantization), cpuinfo=ICE_LAKE, environ={})
    assert fp8.is_cpu_platform({"trainer": {"device": "cuda"}}, environ={}) is False


def test_fp8_needs_an_engine_with_an_fp8_path():
    assert fp8.fp8_rollout_keys() == {KEY: "fp8"}
    for engine in fp8.FP8_ENGINES:
        assert fp8.fp8_rollout_keys(with_fp8({}, engine=engine)) == {KEY: "fp8"}
    with pytest.raises(ConfigError) as raised:
        fp8.check_fp8(with_fp8({}, engine="hf"), cpuinfo=SAPPHIRE_RAPIDS, environ={})
    assert raised.value.key == "actor_rollout_ref.rollout.name"


# --- verl's block FP8 at weight sync --------------------------------------------------------

SHAPES = [(300, 200), (128, 128), (64, 128), (256, 129), (1, 5)]


def weights(shape, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    w = torch.randn(*shape, generator=generator) * 0.02
    w[: min(shape[0], 40), : min(shape[1], 3)] *= 50.0  # outliers: one block's scale set by them
    if shape == (300, 200):
        w[128:256, 128:] = 0.0  # a zero block
        w[256:, :128] *= 1e-6  # a tiny block (subnormal e4m3 codes)
    return w.to(dtype)


def codes_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype == torch.float8_e4m3fn and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


@pytest.mark.parametrize("shape", SHAPES)
def test_reference_equations_match_verls_quantizer_bit_for_bit(shape):
    w = weights(shape)
    before = w.clone()
    codes, descale = fp8.quantize_block_fp8(w)
    ref_codes, ref_descale = fp8.block_fp8_reference(w)
    assert torch.equal(w, before), "the trainer's weight must not be scaled in place"
    assert codes.shape == w.shape and codes.dtype == torch.float8_e4m3fn
    assert descale.shape == (math.ceil(shape[0] / 128), math.ceil(shape[1] / 128))
    assert codes_equal(codes, ref_codes) and torch.equal(descale, ref_descale)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", SHAPES)
def test_round_trip_within_e4m3_tolerance_and_scales_positive_finite(shape, dtype):
    w = weights(shape, dtype)
    codes, descale = fp8.quantize_block_fp8(w)
    assert torch.isfinite(descale).all() and (descale > 0).all()
    assert torch.isfinite(codes.float()).all() and codes.float().abs().max() <= fp8.E4M3_MAX
    deq = fp8.dequantize_block_fp8(codes, descale)
    wf = w.float()
    # per element: half an e4m3 step (2^-4 relative; 2^-10 absolute in the subnormal range)
    step = fp8.dequantize_block_fp8(torch.ones_like(wf).to(torch.float8_e4m3fn), descale)
    assert ((deq - wf).abs() <= 2.0**-4 * wf.abs() + 2.0**-10 * step).all()
    # per block: relative error bounded by e4m3's 2^-3 mantissa step
    for i in range(0, shape[0], 128):
        for j in range(0, shape[1], 128):
            block, back = wf[i : i + 128, j : j + 128], deq[i : i + 128, j : j + 128]
            if block.abs().max() == 0:
                assert (back == 0).all()
            else:
                assert (back - block).norm() <= fp8.E4M3_MANTISSA_STEP * block.norm()
                # the block's largest magnitude lands on e4m3's largest value
                assert codes[i : i + 128, j : j + 128].float().abs().max() == fp8.E4M3_MAX


def test_zero_weight_is_safe():
    codes, descale = fp8.quantize_block_fp8(torch.zeros(130, 260))
    assert (descale == 1.0).all() and (codes.float() == 0).all()
    assert (fp8.dequantize_block_fp8(codes, descale) == 0).all()


@pytest.mark.parametrize("shape", SHAPES)
def test_repeated_syncs_are_idempotent(shape):
    """quantize(dequantize(quantize(w))): the e4m3 codes come back exactly, every sync; the fp32
    descale 1/(448/a) is recomputed from a = 448·descale and may move by a rounding (<= 2 ulp)."""
    codes, descale = fp8.quantize_block_fp8(weights(shape))
    again_codes, again_descale = codes, descale
    for _ in range(5):
        again_codes, again_descale = fp8.quantize_block_fp8(fp8.dequantize_block_fp8(again_codes, again_descale))
        assert codes_equal(again_codes, codes)
        assert ((again_descale / descale - 1).abs() <= 2.0**-21).all()
    # an engine holding bf16 dequantized weights re-quantizes to the same codes too
    bf16 = fp8.dequantize_block_fp8(codes, descale, dtype=torch.bfloat16)
    assert codes_equal(fp8.quantize_block_fp8(bf16)[0], codes)


def test_reports_reading_quantizers_bounded_too():
    w = weights((64, 96))
    codes, descale = fp8.quantize_per_tensor_fp8(w)
    assert descale.dim() == 0 and descale > 0
    assert codes.float().abs().max() == fp8.E4M3_MAX
    x = torch.randn(3, 5, 256) * torch.logspace(-3, 1, 256)
    for group in (None, 128):
        deq = fp8.fake_quant_activation(x, group)
        assert deq.shape == x.shape and not torch.equal(deq, x)
        assert ((deq - x).abs() <= 2.0**-4 * x.abs() + 1e-3 * x.abs().amax(-1, keepdim=True)).all()
    # per-token groups of 128 follow small channels more closely than one scale per token
    assert (fp8.fake_quant_activation(x, 128) - x).abs().sum() < (fp8.fake_quant_activation(x, None) - x).abs().sum()


# --- the option file ------------------------------------------------------------------------


def test_option_composed_with_the_nemotron_recipe_sets_verls_key():
    from reasonrl.composition import compose_config
    from reasonrl.config import config_value

    plain = compose_config(["recipe=nemotron"])
    config = compose_config(["recipe=nemotron", "+reasonrl/rollout=fp8"])
    assert config_value(plain, KEY) is None
    for key, value in fp8.fp8_rollout_keys(config).items():
        assert config_value(config, key) == value
    assert config_value(config, "actor_rollout_ref.rollout.name") == "vllm"
    fp8.check_fp8(config, cpuinfo=ICE_LAKE, environ={})  # a GPU run: accepted
    tiny = compose_config(["recipe=nemotron", "+preset=cpu_tiny", "+reasonrl/rollout=fp8"])
    with pytest.raises(ConfigError) as raised:
        fp8.check_fp8(tiny, cpuinfo=ICE_LAKE, environ={})
    assert raised.value.key == KEY
