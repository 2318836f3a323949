"""llm.import_ckpt (HF nemotron-nas -> NeMo-2 dist checkpoint) and llm.export_ckpt back, on CPU."""
import sys, time, traceback, shutil
from pathlib import Path
import torch
sys.path.insert(0, "/work/nemo-trial/exp")
import tiny_nas_hf
from cpu_nemo import *
import nemo.collections.llm as llm
from nemo.lightning import io
HF = "/work/nemo-trial/exp/hf_tiny"
OUT = Path("/work/nemo-trial/exp/nemo_tiny"); EXP = Path("/work/nemo-trial/exp/hf_tiny_exported")

# dist-ckpt save spawns a multiprocessing Manager (spawn start method): the script must be import-safe
def main():
    patch_cuda_device_for_cpu()   # parallel state: the importer's Trainer/MegatronStrategy sets it up itself
    io.model_importer(CpuLlamaNemotronModel, "hf")(CpuHFLlamaNemotronImporterFixedSync)
    from transformers import AutoModelForCausalLM
    hf = AutoModelForCausalLM.from_pretrained(HF, dtype="auto").eval()
    x = torch.randint(3, 256, (2, 12)); pos = torch.arange(12).unsqueeze(0).expand(2, -1)
    mask = torch.triu(torch.ones(12, 12, dtype=torch.bool), diagonal=1)[None, None]
    ref = hf(x).logits.detach()
    t = time.time()
    try:
        imp = CpuHFLlamaNemotronImporterFixedSync(HF)
        out = llm.import_ckpt(model=CpuLlamaNemotronModel(imp.config), source="hf://" + HF, output_path=OUT, overwrite=True)
        print("RESULT import_ckpt OK", out, round(time.time() - t, 1), "s")
    except Exception as e:
        traceback.print_exc(); print("RESULT import_ckpt FAILED", type(e).__name__, str(e)[:300]); raise SystemExit(1)
    try:
        conn = io.load_context(OUT, subpath="model").exporter("hf", OUT)  # registered last in cpu_nemo: Fixed
        print("exporter class", type(conn).__name__)
        model, trainer = conn.nemo_load(OUT, cpu=True)
        mod = model.module
        while hasattr(mod, "module"): mod = mod.module
        with torch.no_grad():
            got = mod(input_ids=x, position_ids=pos, attention_mask=mask)[..., :256]
        print("RESULT reload of imported NeMo ckpt: max|logits diff| vs HF =", (got - ref).abs().max().item())
    except Exception as e:
        traceback.print_exc(); print("RESULT reload FAILED", type(e).__name__, str(e)[:300])
    try:
        shutil.rmtree(EXP, ignore_errors=True)
        res = llm.export_ckpt(OUT, target="hf", output_path=EXP, overwrite=True, target_model_name=HF)
        hf2 = AutoModelForCausalLM.from_pretrained(EXP, dtype="auto").eval()
        d = (hf2(x).logits - ref).abs().max().item()
        s1, s2 = hf.state_dict(), hf2.state_dict()
        bad = [k for k in s1 if k in s2 and not torch.equal(s1[k].float(), s2[k].float())]
        print("RESULT export_ckpt OK:", type(hf2).__name__, hf2.dtype, "max|logits diff| vs original HF =", d, "\n  tensors differing from original:", bad)
    except Exception as e:
        traceback.print_exc(); print("RESULT export FAILED", type(e).__name__, str(e)[:300])


if __name__ == "__main__":
    main()
