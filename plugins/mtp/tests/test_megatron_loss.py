"""megatron-core's own MTP loss equals ours (issue 9): with mtp_num_layers = D and
mtp_loss_scaling_factor = λ, a real GPTModel's gradients equal those of L_main + λ·(1/D)·Σ_k L^k
(``core.total_loss``) built from the per-depth losses, and — for D = 3 — differ from the
"λ per depth, summed" reading; megatron's own per-depth loss log equals our L^k. Its MTP forward
(DeepSeek-V3 §2.2 as megatron builds it) equals ``core.mtp_token_losses`` on the same weights only
when h^0 and each depth's hand-on are taken *after* their final norms; MiMo §2.2 (our core) takes
both before — and ``megatron_mimo.use_mimo_function`` makes the same model compute MiMo's. Each
case runs in a fresh process (megatron needs a process group and global state)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from reasonrl.plugins.mtp.megatron_adapter import megatron_mtp_settings


def run(*arguments) -> dict:
    completed = subprocess.run(
        [sys.executable, "-m", "reasonrl.plugins.mtp.megatron_adapter", *map(str, arguments)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = next((line for line in completed.stdout.splitlines() if line.startswith("RESULT ")), None)
    assert line is not None, completed.stderr[-3000:]
    return json.loads(line[len("RESULT ") :])


@pytest.mark.parametrize("depth", [1, 3])
def test_megatron_core_trains_the_same_objective(depth):
    result = run(depth, 0.3)
    assert result["mtp_parameters"] > 0  # gradients reach megatron's MTP layers
    assert result["vs_ours"] < 1e-6 * max(result["grad_scale"], 1.0), result
    assert len(result["depth_losses_ours_vs_megatron_logged"]) == depth
    for ours, logged in result["depth_losses_ours_vs_megatron_logged"]:
        assert abs(ours - logged) < 1e-5, result
    if depth > 1:  # the test can tell the definitions apart
        assert result["vs_summed"] > 1e-3 * result["grad_scale"], result


@pytest.mark.parametrize("depth", [1, 3])
def test_megatron_core_mtp_forward_against_core(depth):
    """Per-token CE per depth, positions i < T-k-1. With megatron's reading (h^0 after the main
    final norm, depth k fed depth k-1's normed output) our core reproduces megatron exactly; MiMo's
    (both before) differs at every depth, and h^0 alone accounts for depth 1 only; megatron's model
    with MiMo's block equals the definition."""
    result = run("forward", depth)
    assert result["positions"] == [2 * (16 - k - 1) for k in range(1, depth + 1)], result
    for k in range(depth):
        assert result["megatron_convention"][k] < 1e-5, result
        assert result["mimo_definition"][k] > 1e-2, result
        assert (result["post_norm_h0_only"][k] < 1e-5) == (k == 0), result
        # megatron's model with megatron_mimo's block computes MiMo's function (verl's Megatron actor)
        assert result["megatron_mimo"][k] < 1e-5, result


def test_settings_validate_their_arguments():
    assert megatron_mtp_settings(3, 0.3) == {"mtp_num_layers": 3, "mtp_loss_scaling_factor": 0.3}
    with pytest.raises(ValueError, match="loss_weight"):
        megatron_mtp_settings(1, -0.1)
    with pytest.raises(ValueError, match="num_layers"):
        megatron_mtp_settings(0, 0.1)


def test_mimo_input_projection_halves_are_reordered_both_ways():
    """mbridge's MiMo map copies input_proj ([hidden ; embedding]) into eh_proj ([embedding ; hidden]):
    the patch swaps the halves on load and back on export, through mbridge's own conversion methods."""
    import torch
    from mbridge.models.mimo import MimoBridge

    from reasonrl.patches.mtp.mbridge_mimo_input_proj import PATCH
    from reasonrl.patching import apply_patch

    apply_patch(PATCH)
    bridge = MimoBridge.__new__(MimoBridge)  # the conversion methods read no state for these names
    bridge.make_vocab_size_divisible_by, bridge.dtype = None, None
    hidden_half, embedding_half = torch.randn(4, 4), torch.randn(4, 4)
    hf = torch.cat([hidden_half, embedding_half], dim=1)
    mcore = bridge._weight_to_mcore_format("mtp.layers.0.eh_proj.weight", [hf])
    assert torch.equal(mcore, torch.cat([embedding_half, hidden_half], dim=1))  # megatron's order
    names, (back,) = bridge._weight_to_hf_format("mtp.layers.0.eh_proj.weight", mcore)
    assert names == ["model.mtp_layers.0.input_proj.weight"] and torch.equal(back, hf)
    norm = torch.randn(4)  # other MTP weights pass unchanged
    assert torch.equal(bridge._weight_to_mcore_format("mtp.layers.0.enorm.weight", [norm]), norm)
