import sys, time, traceback, json
t0 = time.time()
import torch
sys.path.insert(0, "/work/nemo-trial/exp")
import tiny_nas_hf
from cpu_nemo import *
print("imports", round(time.time() - t0, 1), "s")
HF = "/work/nemo-trial/exp/hf_tiny"
init_cpu_parallel(); patch_cuda_device_for_cpu()
imp = CpuHFLlamaNemotronImporter(HF)
cfg = imp.config
print("config class", type(cfg).__name__, "num_query_groups", cfg.num_query_groups, "ffn", cfg.ffn_hidden_size,
      "per-block", [(b.attention, b.mlp) for b in cfg.per_block_parameters])
print("dtype", cfg.params_dtype, "bf16", cfg.bf16, "seq_length", cfg.seq_length)
tok = imp.tokenizer
model = cfg.configure_model(tok).eval()
print(model)
print([n for n, _ in model.named_parameters()])
x = torch.randint(3, 256, (2, 12))
pos = torch.arange(12).unsqueeze(0).expand(2, -1)
# megatron/core/transformer/utils.py:35 builds the default causal mask on "cuda": pass one (True = masked)
mask = torch.triu(torch.ones(12, 12, dtype=torch.bool), diagonal=1)[None, None]
try:
    with torch.no_grad():
        out = model(input_ids=x, position_ids=pos, attention_mask=mask)
    print("FORWARD OK (random init)", tuple(out.shape))
except Exception:
    traceback.print_exc()
    raise SystemExit(1)
from transformers import AutoModelForCausalLM
hf = AutoModelForCausalLM.from_pretrained(HF, torch_dtype="auto").eval()
model = imp.convert_state(hf, model)
with torch.no_grad():
    ref = hf(x).logits
    got = model(input_ids=x, position_ids=pos, attention_mask=mask)[..., :256]
print("HF vs NeMo-after-import max|diff| logits:", (ref - got).abs().max().item(), "ref scale", ref.abs().max().item())
sd = model.state_dict(); hsd = hf.state_dict()
for k in sorted(sd):
    if k.endswith("_extra_state"): continue
    v = sd[k]
    print(f"  {k:60s} {tuple(v.shape)}  all-ones={bool((v == 1).all())}")
json.dump({"layers_state": sorted(k for k in sd if not k.endswith('_extra_state'))}, open("/work/nemo-trial/exp/nemo_keys.json", "w"))
