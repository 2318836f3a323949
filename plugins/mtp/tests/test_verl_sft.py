"""The MTP loss on verl's FSDP SFT trainer (``verl_sft.py``) against the objective written per
sequence: verl's ``sft_loss`` (real) + λ · mean_k L^k, L^k averaged over the targets t_{i+k+1}
that count in verl's loss mask across the whole batch — in padded and packed layouts, split into
micro-batches, D = 3, with a response that starts before position k+1 (fewer targets at depth k)."""

from __future__ import annotations

import json

import pytest
import torch
from omegaconf import OmegaConf
from verl.utils import tensordict_utils as tu
from verl.utils.dataset.dataset_utils import DatasetPadMode

from reasonrl.config import ConfigError
from reasonrl.plugins.mtp.core import WeightSchedule
from reasonrl.plugins.mtp.hf_model import MiMoConfig, MiMoForCausalLM
from reasonrl.plugins.mtp.tests.verl_layouts import engine_model_output, nested
from reasonrl.plugins.mtp.verl_sft import MTPSFTLoss, configure, depth_token_counts

SMALL = dict(
    vocab_size=40,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)
DEPTHS = 3
LENGTHS, PROMPTS = (9, 6, 11), (3, 2, 4)  # the second response starts at index 2 < k + 1 for k = 2, 3


def batch():
    torch.manual_seed(0)
    ids = [torch.randint(0, 40, (n,)) for n in LENGTHS]
    masks = [
        torch.cat([torch.zeros(p, dtype=torch.long), torch.ones(n - p, dtype=torch.long)])
        for n, p in zip(LENGTHS, PROMPTS)
    ]
    return ids, masks


def expected_loss(model, ids, masks, weight):
    """Per sequence (no padding, no packing): sums of the main and per-depth CE over counted
    targets, then one global mean per term."""
    main_sum = main_count = 0
    depth_sums, depth_counts = [0] * DEPTHS, [0] * DEPTHS
    for seq, mask in zip(ids, masks):
        out = model.mtp_outputs(seq[None], loss_mask=mask[None])
        main_sum, main_count = main_sum + out.main_loss * mask[1:].sum(), main_count + mask[1:].sum()
        for k in range(1, DEPTHS + 1):
            depth_sums[k - 1] = depth_sums[k - 1] + out.mtp.losses[k - 1] * mask[k + 1 :].sum()
            depth_counts[k - 1] += mask[k + 1 :].sum()
    return main_sum / main_count + weight * torch.stack([s / c for s, c in zip(depth_sums, depth_counts)]).mean()


def verl_micro_batch(model, ids, masks, packed: bool, batch_num_tokens: int, depths: int = DEPTHS):
    """Run the model as verl's MTP engine does (padded: right padding + attention mask; packed:
    one row, restarting position ids; no cache, so transformers separates packed sequences) and
    build the loss function's inputs as verl does."""
    data = tu.get_tensordict(
        {"input_ids": nested(ids), "loss_mask": nested(masks)},
        non_tensor_dict={
            "dp_size": 1,
            "batch_num_tokens": batch_num_tokens,
            "use_remove_padding": packed,
            "pad_mode": DatasetPadMode.NO_PADDING,
        },
    )
    return engine_model_output(model, ids, data, packed, depths), data


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
def test_the_sft_loss_with_mtp_equals_the_objective_over_the_global_batch(packed):
    torch.manual_seed(1)
    model = MiMoForCausalLM(MiMoConfig(num_nextn_predict_layers=DEPTHS, **SMALL))
    ids, masks = batch()
    loss_fn = MTPSFTLoss(WeightSchedule(0.3, 0.1, switch_at=5))
    loss_fn.step = 4
    want = expected_loss(model, ids, masks, weight=0.3)

    nested_masks = torch.nested.as_nested_tensor(masks, layout=torch.jagged)
    loss_fn.token_counts = depth_token_counts(nested_masks, DEPTHS)
    total = sum(int(mask[1:].sum()) for mask in masks)  # verl: loss_mask.sum() (index 0 is prompt)
    got, metrics = 0, {}
    for rows in ((0, 1), (2,)):  # two micro-batches, normalised by the whole batch's counts
        model_output, data = verl_micro_batch(model, [ids[r] for r in rows], [masks[r] for r in rows], packed, total)
        loss, metrics = loss_fn(model_output, data)
        got = got + loss
    torch.testing.assert_close(got, want)
    assert set(metrics) == {f"mtp_losses/mtp_{k}_loss" for k in (1, 2, 3)} | {"mtp_losses/weight"}
    assert set(model_output) == {"log_probs"}  # the MTP losses taken out of verl's outputs

    # the λ schedule's boundary: step 5 uses the later weight
    loss_fn.step = 5
    model_output, data = verl_micro_batch(model, ids, masks, packed, total)
    later, metrics = loss_fn(model_output, data)
    torch.testing.assert_close(later, expected_loss(model, ids, masks, weight=0.1))
    assert metrics["mtp_losses/weight"] == [0.1]


def test_the_gradient_reaches_the_main_model_and_every_mtp_layer():
    torch.manual_seed(2)
    model = MiMoForCausalLM(MiMoConfig(num_nextn_predict_layers=DEPTHS, **SMALL))
    ids, masks = batch()
    loss_fn = MTPSFTLoss(WeightSchedule())
    loss_fn.token_counts = depth_token_counts(torch.nested.as_nested_tensor(masks, layout=torch.jagged), DEPTHS)
    loss, _ = loss_fn(
        *verl_micro_batch(model, ids, masks, packed=True, batch_num_tokens=sum(int(m[1:].sum()) for m in masks))
    )
    loss.backward()
    for k in range(DEPTHS):
        assert model.model.mtp_layers[k].input_proj.weight.grad.abs().sum() > 0
    assert model.model.layers[0].mlp.up_proj.weight.grad.abs().sum() > 0


def test_a_forward_without_mtp_losses_is_an_error_not_a_silent_main_only_loss():
    model = MiMoForCausalLM(MiMoConfig(num_nextn_predict_layers=1, **SMALL))
    ids, masks = batch()
    loss_fn = MTPSFTLoss(WeightSchedule())
    loss_fn.token_counts = torch.ones(1)
    with pytest.raises(RuntimeError, match="no MTP losses"):  # verl's own engine: no MTP outputs
        loss_fn(*verl_micro_batch(model, ids, masks, packed=True, batch_num_tokens=10, depths=0))


def sft_config(tmp_path, layers=2, **engine):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mimo", "num_nextn_predict_layers": layers}))
    return OmegaConf.create(
        {
            "engine": {"strategy": "fsdp2", "ulysses_sequence_parallel_size": 1, **engine},
            "model": {
                "path": str(tmp_path),
                "mtp": {"enable": False, "enable_train": False, "mtp_loss_scaling_factor": 0.1},
            },
        }
    )


def test_configure_writes_verls_mtp_keys_and_rejects_what_cannot_run(tmp_path):
    config = sft_config(tmp_path)
    config.reasonrl = {"mtp": {"loss_weight": 0.25}}
    assert configure(config) is True  # FSDP: our loss
    assert (config.model.mtp.enable, config.model.mtp.enable_train, config.model.mtp.mtp_loss_scaling_factor) == (
        True,
        True,
        0.25,
    )

    megatron = sft_config(tmp_path, strategy="megatron")
    assert configure(megatron) is False  # verl's own megatron-core MTP loss
    megatron.reasonrl = {"mtp": {"switch_at": 100}}
    with pytest.raises(ConfigError, match=r"reasonrl\.mtp\.switch_at"):
        configure(megatron)
    with pytest.raises(ConfigError, match=r"engine\.ulysses_sequence_parallel_size"):
        configure(sft_config(tmp_path, ulysses_sequence_parallel_size=2))
    with pytest.raises(ConfigError, match=r"model\.path.*no MTP layers"):
        configure(sft_config(tmp_path, layers=0))
    negative = sft_config(tmp_path)
    negative.reasonrl = {"mtp": {"loss_weight": -0.1}}
    with pytest.raises(ConfigError, match=r"reasonrl\.mtp\.loss_weight"):
        configure(negative)
