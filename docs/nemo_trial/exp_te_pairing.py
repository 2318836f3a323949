"""What NeMo's wildcard mapping does with TE-style target names when the layer sets differ (no TE needed:
pure state-dict bookkeeping). HF layer 2 has linear attention (has input_layernorm, no q_proj);
TE path: only real-attention layers 0 and 3 have self_attention.linear_qkv.layer_norm_weight."""
import torch
from nemo.lightning.io.state import TransformCTX, StateDictTransform
src = {f"model.layers.{i}.input_layernorm.weight": torch.full((2,), float(i)) for i in (0, 2, 3)}
tgt = {f"decoder.layers.{i}.self_attention.linear_qkv.layer_norm_weight": torch.zeros(2) for i in (0, 3)}
tgt["decoder.layers.2.self_attention.layer_norm_weight"] = torch.zeros(2)   # TELayerNormColumnParallelLinearGathered
ctx = TransformCTX(source=None, source_state=src, target=None, target_state=tgt)
StateDictTransform("model.layers.*.input_layernorm.weight", "decoder.layers.*.self_attention.linear_qkv.layer_norm_weight")(ctx)
for k, v in tgt.items():
    print(f"RESULT {k} <- value of HF layer {v[0].item():.0f}" if v.abs().sum() or k.startswith('decoder.layers.0') else f"RESULT {k} not set (stays at init)")
