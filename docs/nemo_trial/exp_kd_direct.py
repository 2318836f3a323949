"""ModelOpt logits KD (the pieces llm.distill uses) driven by hand on CPU, without the NeMo/Megatron training loop."""
import sys, time, traceback
sys.path.insert(0, "/work/nemo-trial/exp")
import torch
import tiny_nas_hf
from cpu_nemo import *

init_cpu_parallel(); patch_cuda_device_for_cpu()
import modelopt.torch.distill as mtd
from nemo.collections.llm.modelopt.distill.utils import load_distillation_config, adjust_distillation_model_for_mcore
from transformers import AutoModelForCausalLM
HF = "/work/nemo-trial/exp/hf_tiny"
imp = CpuHFLlamaNemotronImporterFixed(HF); cfg = imp.config; tok = imp.tokenizer
teacher = imp.convert_state(AutoModelForCausalLM.from_pretrained(HF, dtype="auto").eval(), cfg.configure_model(tok))
torch.manual_seed(3)
student = cfg.configure_model(tok)   # same heterogeneous architecture, random init
dcfg = load_distillation_config(None, cfg, cfg)
dm = mtd.convert(student, mode=[("kd_loss", {"teacher_model": teacher, "criterion": dcfg.criterion,
                                              "loss_balancer": dcfg.loss_balancer})])
adjust_distillation_model_for_mcore(dm, distill_cfg=dcfg)
print("distillation model:", type(dm).__name__, "trainable params:", sum(p.numel() for p in dm.parameters() if p.requires_grad))
opt = torch.optim.AdamW([p for p in dm.parameters() if p.requires_grad], lr=3e-3)
B, S = 4, 16
mask = torch.triu(torch.ones(S, S, dtype=torch.bool), diagonal=1)[None, None]
pos = torch.arange(S).unsqueeze(0).expand(B, -1)
dm.train()
t = time.time()
for step in range(8):
    x = torch.randint(3, 256, (B, S)); labels = torch.roll(x, -1, 1); loss_mask = torch.ones(B, S)
    lm = dm(input_ids=x, position_ids=pos, attention_mask=mask, labels=labels)      # per-token LM loss [B, S]
    if step == 0: print("forward returns", type(lm), [getattr(t, "shape", t) for t in (lm if isinstance(lm, tuple) else [lm])])
    if isinstance(lm, tuple): lm = lm[0]
    def red(l):  # as nemo/collections/llm/modelopt/distill/model.py _masked_token_loss (TP=CP=1)
        if isinstance(l, tuple):
            l = l[0]
        return (l.reshape(-1).float() * loss_mask.reshape(-1)).sum() / loss_mask.sum()
    losses = dm.compute_kd_loss(student_loss=red(lm), loss_reduction_fn=red)
    opt.zero_grad(); losses["kd_loss"].backward(); opt.step()
    print(f"step {step}: kd_loss {losses['kd_loss'].item():.4f} logits_loss {losses['logits_loss'].item():.4f}")
print("RESULT manual ModelOpt KD on CPU OK", round(time.time() - t, 1), "s for 8 steps")
