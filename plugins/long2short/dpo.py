"""DPO on long2short pairs (Kimi k1.5 §2.4) with TRL's ``DPOTrainer`` (adapter: trl is imported
inside the functions; ``pip install reasonrl[long2short]``).

TRL is the field's maintained DPO trainer and installs beside verl 0.9.1 and the CPU torch with
no other package, so it is used as is (pinned to 1.12.0: verl 0.9.1 imports trl's PPO value-head
class in its workers whenever trl is installed, and trl 1.14+ removed it): the loss is DPO's (Rafailov et al. 2023),

    L = −E log σ(β [(log π_θ(y_w|x) − log π_ref(y_w|x)) − (log π_θ(y_l|x) − log π_ref(y_l|x))]),

log-probabilities summed over the response tokens, π_ref the frozen starting model (a separate
copy loaded from the same checkpoint). ``integration_tests/long2short/test_long2short.py`` checks TRL's loss
against this equation computed from the models' logits.
"""

from __future__ import annotations

from pathlib import Path


def trainer(
    model_path: Path,
    pairs: Path,
    output: Path,
    *,
    beta: float = 0.1,
    learning_rate: float = 1e-5,
    steps: int = 100,
    batch_size: int = 8,
    seed: int = 0,
    max_length: int = 1024,
    ref_model=None,
):
    """TRL's DPOTrainer on the DPO parquet, the policy and the frozen reference both loaded from
    ``model_path`` (unless ``ref_model`` is given)."""
    import datasets
    import pandas as pd
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    if not 0 < beta:
        raise ValueError(f"beta: {beta} must be > 0")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    policy = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    reference = (
        ref_model if ref_model is not None else AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    )
    frame = pd.read_parquet(pairs)
    if frame.empty:
        raise ValueError(f"{pairs}: no DPO pairs (no question had a correct sample and a longer negative)")
    rows = datasets.Dataset.from_list(
        [
            {key: [dict(m) for m in row[key]] for key in ("prompt", "chosen", "rejected")}
            for row in frame.to_dict("records")
        ]
    )
    config = DPOConfig(
        output_dir=str(output),
        per_device_train_batch_size=batch_size,
        max_steps=steps,
        learning_rate=learning_rate,
        beta=beta,
        seed=seed,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
        max_length=max_length,
    )
    return DPOTrainer(model=policy, ref_model=reference, args=config, train_dataset=rows, processing_class=tokenizer)


def train(model_path: Path, pairs: Path, output: Path, **knobs) -> list[dict]:
    """Train, save the policy and tokenizer to ``output``; TRL's log (loss, rewards/margins, ...) per step."""
    dpo = trainer(model_path, pairs, output, **knobs)
    dpo.train()
    dpo.save_model(str(output))
    return [entry for entry in dpo.state.log_history if "loss" in entry]
