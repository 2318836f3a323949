import sys, time, traceback
import torch
sys.path.insert(0, "/work/nemo-trial/exp")
import tiny_nas_hf
from cpu_nemo import *
HF = sys.argv[1] if len(sys.argv) > 1 else "/work/nemo-trial/exp/hf_tiny"
init_cpu_parallel(); patch_cuda_device_for_cpu()
from transformers import AutoModelForCausalLM
hf = AutoModelForCausalLM.from_pretrained(HF, dtype="auto").eval()
x = torch.randint(3, 256, (2, 12)); pos = torch.arange(12).unsqueeze(0).expand(2, -1)
mask = torch.triu(torch.ones(12, 12, dtype=torch.bool), diagonal=1)[None, None]
for name, cls in [("stock NeMo convert_state", CpuHFLlamaNemotronImporter), ("fixed per-layer convert_state", CpuHFLlamaNemotronImporterFixed)]:
    try:
        imp = cls(HF); cfg = imp.config
        torch.manual_seed(1)
        model = cfg.configure_model(imp.tokenizer).eval()
        model = imp.convert_state(hf, model)
        with torch.no_grad():
            d = (hf(x).logits - model(input_ids=x, position_ids=pos, attention_mask=mask)[..., :256]).abs().max().item()
        sd = model.state_dict(); hsd = hf.state_dict()
        lin = {k: torch.equal(sd[k], hsd[h]) for k, h in [("decoder.layers.2.self_attention.weight", "model.layers.2.self_attn.linear_attn.weight"),
                                                          ("decoder.layers.3.mlp.weight", "model.layers.3.mlp.linear_mlp.weight")] if k in sd and h in hsd}
        print(f"RESULT {name}: max|logits diff| = {d:.3g}; linear-replacement weights copied: {lin}")
    except Exception as e:
        traceback.print_exc(); print(f"RESULT {name}: FAILED {type(e).__name__}: {str(e)[:400]}")
