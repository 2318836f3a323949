"""llm.distill (ModelOpt logits KD) on CPU: teacher = student = the imported tiny heterogeneous model."""
import sys, time, traceback, shutil
sys.path.insert(0, "/work/nemo-trial/exp")
import torch
import tiny_nas_hf
from cpu_nemo import *


def main():
    patch_cuda_device_for_cpu()
    if "--megatron-optim" in sys.argv:
        patch_megatron_fp32_optimizer_for_cpu()
    import nemo.collections.llm as llm
    from nemo import lightning as nl
    from megatron.core.optimizer import OptimizerConfig
    CK = "/work/nemo-trial/exp/nemo_tiny"
    shutil.rmtree("/work/nemo-trial/exp/distill_logs", ignore_errors=True)
    from nemo.lightning import io
    tok = io.load_context(CK + "/context", subpath="model").tokenizer  # MockDataModule's default tokenizer downloads GPT-2 files
    data = llm.MockDataModule(seq_length=16, tokenizer=tok, micro_batch_size=1, global_batch_size=1, num_train_samples=8,
                              num_val_samples=2, num_test_samples=2)
    trainer = nl.Trainer(devices=1, accelerator="cpu", max_steps=2, limit_val_batches=0, val_check_interval=2,
                         log_every_n_steps=1, enable_checkpointing=False,
                         strategy=nl.MegatronStrategy(ckpt_async_save=False, ckpt_load_strictness="log_all"),
                         plugins=(nl.MegatronMixedPrecision(precision="32") if "--megatron-optim" in sys.argv else None))
    if "--megatron-optim" in sys.argv:
        optim = nl.MegatronOptimizerModule(OptimizerConfig(optimizer="adam", lr=1e-4, use_distributed_optimizer=False,
                                                           bf16=False, fp16=False, params_dtype=torch.float32,
                                                           clip_grad=0.0))
    else:  # megatron's FP32Optimizer puts its loss scale on 'cuda' (megatron/core/optimizer/optimizer.py:903)
        from functools import partial
        from nemo.lightning.pytorch.optim import PytorchOptimizerModule
        optim = PytorchOptimizerModule(optimizer_fn=partial(torch.optim.AdamW, lr=1e-4))
    t = time.time()
    try:
        out = llm.distill(student_model_path=CK, teacher_model_path=CK, data=data, trainer=trainer, optim=optim,
                          tokenizer="model", log=nl.NeMoLogger(log_dir="/work/nemo-trial/exp/distill_logs"))
        print("RESULT distill OK", out, round(time.time() - t, 1), "s")
    except BaseException as e:
        traceback.print_exc(); print("RESULT distill FAILED", type(e).__name__, str(e)[:500])


if __name__ == "__main__":
    main()
