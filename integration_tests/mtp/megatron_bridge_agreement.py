"""A MiMo checkpoint loaded into megatron-core as verl's CPU Megatron engine loads it (mbridge's MiMo
bridge, the local layer spec, the patch ``mbridge-mimo-input-proj``, ``megatron_mimo``'s block),
against the Hugging Face MiMo class the checkpoint and vLLM's drafter use: per-token main and MTP
cross-entropies on the same tokens. Run in a fresh process (megatron's global state):

    python integration_tests/mtp/megatron_bridge_agreement.py MODEL_DIR [--without-patch] [--without-mimo-block]

prints ``RESULT {json}``: max |Δ CE| of the main model and of each MTP depth."""

from __future__ import annotations

import argparse
import json
import os

import torch


def megatron_per_token(model_dir: str, patch: bool, mimo_block: bool, tokens: torch.Tensor) -> list[torch.Tensor]:
    import verl.workers.engine  # noqa: F401  first, as in verl's workers: the plugins register their engines on it
    from transformers import AutoConfig
    from verl.models.mcore.mbridge import AutoBridge  # mbridge with verl's patches, as verl's engine loads it

    from reasonrl.compat.megatron import init_single_process
    from reasonrl.patches.cpu_platform import megatron_host_device
    from reasonrl.patches.mtp import mbridge_mimo_input_proj
    from reasonrl.patching import apply_patch
    from reasonrl.plugins.cpu_platform.megatron_engine import host_bridge
    from reasonrl.plugins.mtp.compat import mtp_logged_losses, record_language_model_losses
    from reasonrl.plugins.mtp.megatron_mimo import use_mimo_function

    init_single_process(0)
    apply_patch(megatron_host_device.PATCH)
    if patch:
        apply_patch(mbridge_mimo_input_proj.PATCH)
    from verl.utils.megatron_utils import get_hf_rope_theta

    hf_config = AutoConfig.from_pretrained(model_dir)
    hf_config.rope_theta = get_hf_rope_theta(hf_config)  # mbridge reads the root attribute (transformers 4)
    bridge = AutoBridge.from_config(hf_config, dtype=torch.float32)
    bridge.set_extra_args(
        use_cpu_initialization=True, masked_softmax_fusion=False, attention_backend="local", mtp_loss_scaling_factor=0.3
    )
    bridge = host_bridge(bridge, 1)
    (model,) = bridge.get_model(wrap_with_ddp=False)
    bridge.load_weights([model], model_dir)
    if mimo_block:
        use_mimo_function(model)
    model.eval()
    depth = model.config.mtp_num_layers
    mtp_logged_losses(depth)  # megatron's MTP loss log, on the host
    losses: list[torch.Tensor] = []
    restore = record_language_model_losses(model, losses)
    length = tokens.shape[1]
    mask = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)[None, None]
    with torch.no_grad():
        model(
            input_ids=tokens,
            position_ids=torch.arange(length).expand_as(tokens),
            attention_mask=mask,
            labels=torch.roll(tokens, -1, 1),
        )
    restore()
    return losses  # the MTP depths first, then the main loss: [batch, T] each


def hugging_face_per_token(model_dir: str, tokens: torch.Tensor) -> tuple[torch.Tensor, list]:
    from transformers import AutoModelForCausalLM

    from reasonrl.plugins.mtp.hf_model import register_with_transformers

    register_with_transformers()
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        output = model(input_ids=tokens, mtp_loss_depths=model.config.num_nextn_predict_layers)
    logits = output.logits[:, :-1]
    main = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")
    return main, list(zip(output.mtp_token_losses, output.mtp_token_valid))


def agreement(model_dir: str, patch: bool = True, mimo_block: bool = True, seed: int = 0) -> dict:
    os.environ.setdefault("VERL_PLATFORM", "cpu")  # the host-device patch applies on the cpu platform
    from transformers import AutoConfig

    from reasonrl.plugins.mtp.hf_model import register_with_transformers

    register_with_transformers()
    vocab = AutoConfig.from_pretrained(model_dir).vocab_size
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, (2, 24), generator=generator)
    theirs = megatron_per_token(model_dir, patch, mimo_block, tokens)
    main, depths = hugging_face_per_token(model_dir, tokens)
    result = {"main": (theirs[-1][:, :-1] - main).abs().max().item(), "depths": [], "ce_scale": main.max().item()}
    for k, (per_token, valid) in enumerate(depths):
        result["depths"].append((theirs[k] - per_token)[valid.bool()].abs().max().item())
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir")
    parser.add_argument("--without-patch", action="store_true")
    parser.add_argument("--without-mimo-block", action="store_true")
    args = parser.parse_args()
    result = agreement(args.model_dir, patch=not args.without_patch, mimo_block=not args.without_mimo_block)
    print("RESULT", json.dumps(result), flush=True)
