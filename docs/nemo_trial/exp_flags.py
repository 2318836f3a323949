"""Which CPU flags are actually needed: only apply_rope_fusion=False vs the full CPU_FLAGS set."""
import sys, json, dataclasses, traceback
sys.path.insert(0, "/work/nemo-trial/exp")
import torch
import tiny_nas_hf
from cpu_nemo import *
from nemo.collections.llm.gpt.model import llama_nemotron as ln
init_cpu_parallel(); patch_cuda_device_for_cpu()
j = open("/work/nemo-trial/exp/hf_tiny/config.json").read()
base = dict(num_layers=4, hidden_size=64, num_attention_heads=4, num_query_groups=2, ffn_hidden_size=256, kv_channels=16,
            seq_length=512, heterogeneous_layers_config_encoded_json=j, params_dtype=torch.float32, bf16=False)
@dataclasses.dataclass
class OnlyRope(ln.Llama31NemotronUltra253BConfig):
    apply_rope_fusion: bool = False
S = 12; x = torch.randint(3, 256, (2, S)); pos = torch.arange(S).unsqueeze(0).expand(2, -1)
mask = torch.triu(torch.ones(S, S, dtype=torch.bool), diagonal=1)[None, None]
from nemo.collections.common.tokenizers.huggingface.auto_tokenizer import AutoTokenizer
tok = AutoTokenizer("/work/nemo-trial/exp/hf_tiny")
P = {"persist_layer_norm": False}
for extra in [P, {**P, "use_cpu_initialization": True}, {**P, "use_cpu_initialization": True, "bias_activation_fusion": False},
              {**P, "use_cpu_initialization": True, "bias_activation_fusion": False, "cross_entropy_loss_fusion": False},
              {**P, "use_cpu_initialization": True, "bias_activation_fusion": False, "cross_entropy_loss_fusion": False, "masked_softmax_fusion": False, "bias_dropout_fusion": False}]:
    try:
        c = OnlyRope(**base, **extra)
        print("flags", {k: getattr(c, k) for k in ["bias_activation_fusion", "masked_softmax_fusion", "persist_layer_norm", "bias_dropout_fusion", "gradient_accumulation_fusion", "cross_entropy_loss_fusion", "use_cpu_initialization"]})
        m = c.configure_model(tok)
        y = m(input_ids=x, position_ids=pos, attention_mask=mask, labels=torch.roll(x, -1, 1))
        y.mean().backward()
        print("RESULT", extra, "forward+backward OK", tuple(y.shape))
    except Exception as e:
        print("RESULT", extra, "FAILED", type(e).__name__, str(e)[:300])
