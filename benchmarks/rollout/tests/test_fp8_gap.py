"""The trainer-vs-FP8-engine gap on the smoke model (``benchmarks/rollout/fp8_gap.py``): finite and
positive with FP8, exactly zero with an identity quantizer (the gap measures FP8, not scoring)."""

from __future__ import annotations

import math

import torch

from benchmarks.rollout import fp8_gap


def test_fake_quant_probability_gap_on_the_smoke_model_is_finite_and_positive():
    result = fp8_gap.measure_smoke_gap(prompts=16, samples_per_prompt=4)
    print(result)
    assert result["quantized_linears"] == 14  # 2 layers x (q, k, v, o, gate, up, down); the tied head stays
    assert result["tokens"] >= 64  # at least one token (EOS) per sample
    assert math.isfinite(result["mean_abs_prob_gap"]) and result["mean_abs_prob_gap"] > 0
    assert result["max_abs_prob_gap"] >= result["mean_abs_prob_gap"]
    assert 0.0 <= result["tis_capped_share"] <= 1.0 and result["tis_cap"] == 2.0
    assert result["min_ratio"] <= 1.0 <= result["max_ratio"]


def test_gap_is_zero_without_quantization():
    """Control: an identity 'quantizer' and no activation quantization give exactly the trainer's
    probabilities — the gap measures FP8, not a difference in how the two are scored."""

    def identity(weight, block_size):
        rows, cols = weight.shape
        return weight.float(), torch.ones(math.ceil(rows / block_size[0]), math.ceil(cols / block_size[1]))

    result = fp8_gap.measure_smoke_gap(prompts=8, samples_per_prompt=2, quantize_activations=False, quantizer=identity)
    assert result["tokens"] > 0
    assert result["mean_abs_prob_gap"] == 0.0 and result["tis_capped_share"] == 0.0
