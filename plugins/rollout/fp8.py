"""FP8 generation in RL (Llama-Nemotron §5.2.3) on verl's own rollout quantization.

The report runs vLLM generation in FP8 "with per-tensor weight scales and per-token activation
scales" (1.8x generation speed-up on GPU). verl 0.9.1 already has FP8 rollout:
``actor_rollout_ref.rollout.quantization: fp8`` (``RolloutConfig.quantization``; vLLM accepts
``fp8``/``torchao``/``ascend``). It is *block* FP8 and its shape is fixed in verl's code:

- start-up: ``vLLMHttpServer._apply_quantization`` injects ``hf_overrides.quantization_config =
  {quant_method: fp8, fmt: e4m3, activation_scheme: dynamic, weight_block_size: [128, 128],
  ignored_layers: [model.layers.*.mlp.gate]}`` and patches vLLM (``apply_vllm_quant_patches``);
- every weight sync: ``vLLMColocateWorkerExtension`` -> ``verl.utils.vllm.vllm_quant_utils.
  load_quanted_weights`` -> ``quant_weights`` -> ``verl.utils.kernel.fp8_kernel.scaled_fp8_blockwise``
  (Triton kernel; PyTorch fallback ``_scaled_fp8_blockwise_pytorch``) quantizes each bf16 linear
  weight into e4m3 codes + one ``weight_scale_inv`` per 128x128 block (SGLang/TRT-LLM:
  ``verl.utils.fp8_utils.FP8QuantizerHelper.quant_weights_by_name``, same function).

Reading: the report's per-tensor weight / per-token activation scheme cannot be expressed through
verl 0.9.1's keys — the block size is hard-coded at start-up and the sync path requires one
(``quant_config.weight_block_size``); there is no per-tensor choice without patching verl. So this
option uses **block FP8 as verl implements it**: weights e4m3 with one scale per 128x128 block
(finer than per-tensor), activations quantized dynamically per token and per 128-channel group on
GPU (vLLM's block-FP8 W8A8 path; finer than per-token). On a CPU vLLM runs the same checkpoint
format as W8A16 (``CPUFp8BlockScaledMMKernel``: activations stay bf16) and only with AMX tiles
(Sapphire Rapids or newer); :func:`check_fp8` refuses fp8 on a CPU platform without AMX.

Public functions: :func:`fp8_rollout_keys`, :func:`cpu_has_amx`, :func:`is_cpu_platform`,
:func:`check_fp8` (config); :func:`quantize_block_fp8` (verl's own sync-time function),
:func:`block_fp8_reference` / :func:`dequantize_block_fp8` (the equations, framework-free),
:func:`quantize_per_tensor_fp8` / :func:`fake_quant_activation` (the report's reading, for
measurement only); :func:`fake_quant_engine` / :func:`fake_quant_probability_gap`
(trainer-vs-engine probability gap on an HF causal LM; ``benchmarks/rollout/fp8_gap.py`` prints it
for the smoke model).

verl, vLLM and transformers are imported inside functions only.
"""

from __future__ import annotations

import copy
import math
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch

from reasonrl.config import ConfigError, config_value

#: verl's key (``RolloutConfig.quantization``) and the value that selects FP8 generation.
QUANTIZATION_KEY = "actor_rollout_ref.rollout.quantization"
FP8 = "fp8"
ENGINE_KEY = "actor_rollout_ref.rollout.name"
#: Rollout engines whose verl 0.9.1 server accepts ``quantization: fp8`` (all block FP8, 128x128).
FP8_ENGINES = ("vllm", "sglang", "trtllm")
#: ``weight_block_size`` verl hard-codes in its FP8 quantization config (vLLM, SGLang, TRT-LLM).
VERL_WEIGHT_BLOCK_SIZE = (128, 128)
FP8_DTYPE = torch.float8_e4m3fn
#: Largest finite e4m3 value (``torch.finfo(torch.float8_e4m3fn).max``).
E4M3_MAX = 448.0
#: e4m3 has 3 mantissa bits: neighbouring normal values differ by 2^-3 relative to their binade.
E4M3_MANTISSA_STEP = 2.0**-3
#: /proc/cpuinfo flags vLLM's CPU FP8 kernels need: AMX tiles with BF16 (W8A16 BRGEMM).
AMX_FLAGS = ("amx_tile", "amx_bf16")
SCHEMES = ("block", "per_tensor")


# --- config -------------------------------------------------------------------------------


def fp8_rollout_keys(config: Any = None) -> dict[str, Any]:
    """verl's keys the FP8 option (``+reasonrl/rollout=fp8``) sets, and their values.

    Only ``actor_rollout_ref.rollout.quantization: fp8``: everything else (block size 128x128,
    e4m3, dynamic activation scales, MoE routers left in bf16, quantization at each weight sync)
    follows from it inside verl. Nemotron's per-tensor weight / per-token activation scales have
    no verl key (module docstring): the block reading is what runs. With a ``config`` whose rollout
    engine has no FP8 path in verl, raises :class:`ConfigError` naming ``actor_rollout_ref.rollout.name``.
    """
    if config is not None:
        engine = config_value(config, ENGINE_KEY)
        if engine is not None and str(engine) not in FP8_ENGINES:
            raise ConfigError(
                ENGINE_KEY, f"is {engine!r}: verl's FP8 rollout ({QUANTIZATION_KEY}=fp8) exists for {FP8_ENGINES} only"
            )
    return {QUANTIZATION_KEY: FP8}


def cpu_has_amx(cpuinfo: str | None = None) -> bool:
    """Whether every CPU in ``cpuinfo`` (the text of /proc/cpuinfo; read when None) lists the
    AMX flags vLLM's CPU FP8 kernels need (``amx_tile`` and ``amx_bf16``; ``amx_int8`` alone is
    not enough). No ``flags`` line (ARM, another OS, unreadable file): False."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return False
    flag_sets = []
    for line in cpuinfo.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == "flags":
            flag_sets.append(set(value.split()))
    return bool(flag_sets) and all(all(flag in flags for flag in AMX_FLAGS) for flags in flag_sets)


def is_cpu_platform(config: Any, environ: Mapping[str, str] | None = None) -> bool:
    """A CPU run: ``trainer.device == 'cpu'``, the Ray workers' ``VERL_PLATFORM=cpu`` (how
    reasonrl's cpu_platform plugin is selected, ``reasonrl.compat.verl._cpu_platform``), or
    ``VERL_PLATFORM=cpu`` in ``environ`` (default ``os.environ``)."""
    environ = os.environ if environ is None else environ
    if str(config_value(config, "trainer.device") or "") == "cpu":
        return True
    if str(config_value(config, "ray_kwargs.ray_init.runtime_env.env_vars.VERL_PLATFORM") or "") == "cpu":
        return True
    return environ.get("VERL_PLATFORM", "") == "cpu"


def check_fp8(config: Any, *, cpuinfo: str | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Start-up check: FP8 generation on a CPU platform needs AMX (vLLM's CPU FP8 GEMM is an AMX
    BRGEMM kernel; without it vLLM has no FP8 linear kernel for the CPU). Raises
    :class:`ConfigError` naming ``actor_rollout_ref.rollout.quantization``. No-op unless it is fp8."""
    if str(config_value(config, QUANTIZATION_KEY) or "") != FP8:
        return
    fp8_rollout_keys(config)  # the engine must have an FP8 path
    if is_cpu_platform(config, environ) and not cpu_has_amx(cpuinfo):
        raise ConfigError(
            QUANTIZATION_KEY,
            "is 'fp8' on a CPU platform (trainer.device=cpu / VERL_PLATFORM=cpu) whose CPU has no AMX "
            f"({'/'.join(AMX_FLAGS)} missing from /proc/cpuinfo): vLLM's CPU FP8 kernels need AMX "
            "(Sapphire Rapids or newer). Drop +reasonrl/rollout=fp8 (or set it to null), or run on a GPU.",
        )


# --- weight quantization --------------------------------------------------------------------


def _blocks(shape: Sequence[int], block_size: Sequence[int]) -> tuple[int, int]:
    return math.ceil(shape[0] / block_size[0]), math.ceil(shape[1] / block_size[1])


def quantize_block_fp8(
    weight: torch.Tensor, block_size: Sequence[int] = VERL_WEIGHT_BLOCK_SIZE
) -> tuple[torch.Tensor, torch.Tensor]:
    """What verl does to one linear weight at every weight sync: verl's own
    ``scaled_fp8_blockwise`` (Triton) for a CUDA tensor; for a CPU tensor verl's PyTorch path
    ``_scaled_fp8_blockwise_pytorch`` (the dispatcher picks Triton whenever it is installed, which
    fails on a CPU tensor). Returns ``(e4m3 codes, descale)`` with descale of shape
    ``(ceil(M/bm), ceil(N/bn))``: ``weight ≈ codes * descale`` per block."""
    from verl.utils.kernel import fp8_kernel

    if weight.dim() != 2:
        raise ValueError(f"block FP8 quantizes 2-D weights, got shape {tuple(weight.shape)}")
    block_size = [int(b) for b in block_size]
    # a copy: verl's PyTorch path scales its input in place when nothing copies it on the way
    # (e.g. an fp32 weight with one column block: its .to() and permute(...).contiguous() are no-ops)
    weight = weight.detach().clone()
    if weight.is_cuda:
        codes, descale = fp8_kernel.scaled_fp8_blockwise(weight, weight_block_size=block_size)
    else:
        codes, descale = fp8_kernel._scaled_fp8_blockwise_pytorch(weight, block_size)
    return codes, descale.reshape(_blocks(weight.shape, block_size))


def block_fp8_reference(
    weight: torch.Tensor, block_size: Sequence[int] = VERL_WEIGHT_BLOCK_SIZE
) -> tuple[torch.Tensor, torch.Tensor]:
    """The block-FP8 equations (no verl): per block B, a = max|w_B|, s = 448 / a (1 if a is 0
    or inf), codes = e4m3(clamp(w_B · s, ±448)) (round to nearest even), descale = 1 / s.
    Bit-identical to verl's PyTorch path (tested); used to cross-check verl on an upgrade."""
    if weight.dim() != 2:
        raise ValueError(f"block FP8 quantizes 2-D weights, got shape {tuple(weight.shape)}")
    rows, cols = weight.shape
    bm, bn = (int(b) for b in block_size)
    nm, nn = _blocks(weight.shape, (bm, bn))
    padded = torch.nn.functional.pad(weight.float(), (0, nn * bn - cols, 0, nm * bm - rows))
    blocks = padded.reshape(nm, bm, nn, bn).permute(0, 2, 1, 3)  # (nm, nn, bm, bn)
    amax = blocks.abs().amax(dim=(-2, -1), keepdim=True)
    # torch.div, not ``448 / amax``: a Python number over a tensor is reciprocal(amax) * 448 in
    # torch, one rounding more (verl divides)
    scale = torch.div(E4M3_MAX, amax)
    scale = torch.where((amax == 0) | torch.isinf(amax), torch.ones_like(scale), scale)
    codes = (blocks * scale).clamp(-E4M3_MAX, E4M3_MAX).to(FP8_DTYPE)
    codes = codes.permute(0, 2, 1, 3).reshape(nm * bm, nn * bn)[:rows, :cols].contiguous()
    return codes, torch.reciprocal(scale).reshape(nm, nn)


def dequantize_block_fp8(
    codes: torch.Tensor,
    descale: torch.Tensor,
    block_size: Sequence[int] = VERL_WEIGHT_BLOCK_SIZE,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """``codes * descale`` with each block's descale broadcast over its block (what the FP8
    GEMM computes with), in ``dtype``."""
    rows, cols = codes.shape
    bm, bn = (int(b) for b in block_size)
    descale = descale.reshape(_blocks(codes.shape, (bm, bn))).float()
    full = descale.repeat_interleave(bm, dim=0).repeat_interleave(bn, dim=1)[:rows, :cols]
    return (codes.float() * full).to(dtype)


def quantize_per_tensor_fp8(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The report's reading (not what verl runs): one scale for the whole tensor,
    s = 448 / max|w|. Returns ``(codes, descale)`` with a 0-d descale."""
    amax = weight.float().abs().amax()
    scale = torch.where(amax > 0, torch.div(E4M3_MAX, amax), torch.ones_like(amax))
    codes = (weight.float() * scale).clamp(-E4M3_MAX, E4M3_MAX).to(FP8_DTYPE)
    return codes, torch.reciprocal(scale)


def fake_quant_activation(x: torch.Tensor, group_size: int | None = None, eps: float = 1e-10) -> torch.Tensor:
    """Dynamic activation quantize→dequantize per token (``group_size`` None: the report's
    per-token scale) or per token and group of ``group_size`` channels (vLLM's block-FP8 W8A8
    path, ``per_token_group_quant_fp8``): s = max(amax, eps) / 448 per group."""
    shape, width = x.shape, x.shape[-1]
    group = width if group_size is None else int(group_size)
    groups = math.ceil(width / group)
    xf = torch.nn.functional.pad(x.float(), (0, groups * group - width)).reshape(*shape[:-1], groups, group)
    scale = xf.abs().amax(dim=-1, keepdim=True).clamp_min(eps) / E4M3_MAX
    deq = (xf / scale).clamp(-E4M3_MAX, E4M3_MAX).to(FP8_DTYPE).float() * scale
    return deq.reshape(*shape[:-1], groups * group)[..., :width].to(x.dtype)


# --- trainer vs fake-quant engine ------------------------------------------------------------


def _engine_quantizes(name: str) -> bool:
    """The linears vLLM's Fp8Config quantizes: every LinearBase (the LM head is an embedding
    layer there: bf16) except the ignored MoE routers verl lists (``mlp.gate``)."""
    return not (name.endswith("lm_head") or name.endswith("mlp.gate"))


def fake_quant_engine(
    model: torch.nn.Module,
    scheme: str = "block",
    block_size: Sequence[int] = VERL_WEIGHT_BLOCK_SIZE,
    quantize_activations: bool = True,
    quantizer: Callable[[torch.Tensor, Sequence[int]], tuple[torch.Tensor, torch.Tensor]] | None = None,
) -> tuple[torch.nn.Module, int]:
    """A copy of ``model`` computing as the FP8 engine would: every engine-quantized linear
    weight replaced by dequantize(quantize(w)) and, if ``quantize_activations``, its input
    fake-quantized. ``scheme='block'``: verl's (``quantizer``, default :func:`quantize_block_fp8`;
    activations per token per ``block_size[1]`` channels); ``'per_tensor'``: the report's
    (per-tensor weight scale, per-token activation scale). Returns (engine, linears quantized)."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    quantizer = quantizer or quantize_block_fp8
    engine = copy.deepcopy(model).eval()
    count = 0
    for name, module in engine.named_modules():
        if not isinstance(module, torch.nn.Linear) or not _engine_quantizes(name):
            continue
        weight = module.weight.data
        if scheme == "block":
            codes, descale = quantizer(weight, block_size)
            deq = dequantize_block_fp8(codes, descale, block_size, dtype=weight.dtype)
            group = int(block_size[1])
        else:
            codes, descale = quantize_per_tensor_fp8(weight)
            deq = (codes.float() * descale).to(weight.dtype)
            group = None
        module.weight.data = deq
        if quantize_activations:
            module.register_forward_pre_hook(lambda _m, args, g=group: (fake_quant_activation(args[0], g), *args[1:]))
        count += 1
    return engine, count


def _token_logprobs(model, sequences, attention_mask) -> torch.Tensor:
    positions = (attention_mask.long().cumsum(-1) - 1).clamp_min(0)
    logits = model(input_ids=sequences, attention_mask=attention_mask, position_ids=positions).logits.float()
    return torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, sequences[:, 1:, None]).squeeze(-1)


@torch.no_grad()
def fake_quant_probability_gap(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    *,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
    max_new_tokens: int = 16,
    scheme: str = "block",
    block_size: Sequence[int] = VERL_WEIGHT_BLOCK_SIZE,
    quantize_activations: bool = True,
    quantizer: Callable[[torch.Tensor, Sequence[int]], tuple[torch.Tensor, torch.Tensor]] | None = None,
    tis_cap: float = 2.0,
    seed: int = 0,
) -> dict[str, Any]:
    """Trainer (``model`` as is) vs FP8 engine (:func:`fake_quant_engine`) on tokens the engine
    samples, as in RL: the engine generates up to ``max_new_tokens`` after each left-padded
    prompt (temperature 1, top-p 1, top-k off), then both score the sampled tokens (up to and
    including EOS). Returns mean / max |p_engine − p_trainer|, mean |Δ log p|, and the share of
    tokens whose importance ratio p_trainer / p_engine exceeds the truncated-IS cap ``tis_cap``
    (these are the tokens TIS truncates), with the extreme ratios. ``quantizer``: as in
    :func:`fake_quant_engine` (default verl's block quantizer)."""
    model = model.eval()
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    eos = eos_token_id if eos_token_id is not None else model.generation_config.eos_token_id
    pad = pad_token_id if pad_token_id is not None else (model.generation_config.pad_token_id or 0)
    engine, quantized = fake_quant_engine(model, scheme, block_size, quantize_activations, quantizer)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        sequences = engine.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            do_sample=True,
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            max_new_tokens=max_new_tokens,
            eos_token_id=eos,
            pad_token_id=pad,
        )
    width = input_ids.shape[1]
    response = sequences[:, width:]
    eos_ids = torch.tensor(eos if isinstance(eos, (list, tuple)) else [eos])
    is_eos = torch.isin(response, eos_ids).long()
    response_mask = (is_eos.cumsum(-1) - is_eos) == 0  # up to and including the first EOS
    full_mask = torch.cat([attention_mask.bool(), response_mask], dim=1).long()
    logp_trainer = _token_logprobs(model, sequences, full_mask)[:, width - 1 :][response_mask]
    logp_engine = _token_logprobs(engine, sequences, full_mask)[:, width - 1 :][response_mask]
    p_trainer, p_engine = logp_trainer.exp(), logp_engine.exp()
    ratio = (logp_trainer - logp_engine).exp()
    gap = (p_engine - p_trainer).abs()
    return {
        "scheme": scheme,
        "quantize_activations": bool(quantize_activations),
        "quantized_linears": quantized,
        "tokens": int(gap.numel()),
        "mean_abs_prob_gap": float(gap.mean()),
        "max_abs_prob_gap": float(gap.max()),
        "mean_abs_logprob_gap": float((logp_engine - logp_trainer).abs().mean()),
        "tis_cap": float(tis_cap),
        "tis_capped_share": float((ratio > tis_cap).double().mean()),
        "max_ratio": float(ratio.max()),
        "min_ratio": float(ratio.min()),
    }


def gpu_check() -> dict[str, float]:
    """On a CUDA device verl's dispatcher runs its Triton kernel (descale = a/448, scaled by
    1/descale) instead of the PyTorch path (448/a and its reciprocal): compare it with the
    reference equations. GPU only (``python -m reasonrl.plugins.rollout.fp8 --gpu-check``); not
    run in CI, and not run yet (no GPU lent to this project's sessions)."""
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("--gpu-check needs a CUDA device (verl's Triton FP8 kernel)")
    generator = torch.Generator().manual_seed(0)
    w = torch.randn(300, 200, generator=generator) * 0.02
    w[:40, :3] *= 50.0
    codes, descale = quantize_block_fp8(w.cuda())
    ref_codes, ref_descale = block_fp8_reference(w)
    torch.testing.assert_close(descale.cpu(), ref_descale, rtol=2.0**-21, atol=0.0)
    same = float((codes.cpu().view(torch.uint8) == ref_codes.view(torch.uint8)).float().mean())
    deq, ref = dequantize_block_fp8(codes.cpu(), descale.cpu()), dequantize_block_fp8(ref_codes, ref_descale)
    worst = float(((deq - ref).abs() / (ref.abs() + 1e-12)).max())
    assert same >= 0.999 and worst <= E4M3_MANTISSA_STEP, (same, worst)
    return {"codes_equal_share": same, "max_relative_dequant_gap": worst}


def main() -> None:
    import sys

    if "--gpu-check" not in sys.argv[1:]:
        raise SystemExit(
            "usage: python -m reasonrl.plugins.rollout.fp8 --gpu-check (the smoke-model gap: benchmarks/rollout/fp8_gap.py)"
        )
    print(gpu_check())


if __name__ == "__main__":
    main()
