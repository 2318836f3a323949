"""The trainer-vs-FP8-engine probability gap on reasonrl's tiny smoke model (Llama-Nemotron
§5.2.3 FP8 generation, measured against LongCat's truncated-IS cap): ``fake_quant_probability_gap``
of the rollout plugin on the smoke model and its arithmetic prompts, for verl's block FP8 (W8A8 and
W8A16) and the report's per-tensor / per-token reading.

    .venv/bin/python -m benchmarks.rollout.fp8_gap

Numbers only (the rollout README's table); a tiny model's gap, not a large one's.
"""

from __future__ import annotations

from typing import Any

from reasonrl.plugins.rollout.fp8 import fake_quant_probability_gap


def longcat_tis_cap() -> float:
    """LongCat's truncated-IS cap C: ``reasonrl.objective.tis_cap`` as the objectives plugin's option
    file ``+reasonrl/objective=longcat`` (which the longcat recipe includes) sets it (2.0)."""
    from importlib.resources import files

    from omegaconf import OmegaConf

    text = files("reasonrl.hydra_configs").joinpath("reasonrl/objective/longcat.yaml").read_text()
    return float(OmegaConf.select(OmegaConf.create(text), "reasonrl.objective.tis_cap"))


def measure_smoke_gap(
    prompts: int = 64,
    samples_per_prompt: int = 4,
    recipe: str = "nemotron",
    split: str = "val",
    **kwargs: Any,
) -> dict[str, Any]:
    """:func:`fake_quant_probability_gap` on reasonrl's tiny smoke model (built on first use by
    ``reasonrl.smoke.prepare.ensure``) and its real arithmetic prompts (``data/<recipe>/<split>``),
    ``samples_per_prompt`` samples each; ``tis_cap`` defaults to LongCat's."""
    import pandas as pd
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reasonrl.smoke.prepare import default_root, ensure

    ensure()
    root = default_root()
    tokenizer = AutoTokenizer.from_pretrained(root / "model")
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(root / "model").eval()
    frame = pd.read_parquet(root / "data" / recipe / f"{split}.parquet").head(prompts)
    texts = [
        tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
        for messages in frame["prompt"]
    ]
    batch = tokenizer([t for t in texts for _ in range(samples_per_prompt)], return_tensors="pt", padding=True)
    kwargs.setdefault("tis_cap", longcat_tis_cap())
    result = fake_quant_probability_gap(
        model,
        batch["input_ids"],
        batch["attention_mask"],
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **kwargs,
    )
    result["prompts"] = len(frame)
    return result


def main() -> None:
    for scheme, activations, label in (
        ("block", True, "verl block FP8, W8A8 (vLLM on GPU)"),
        ("block", False, "verl block FP8, W8A16 (vLLM on CPU with AMX)"),
        ("per_tensor", True, "report's reading: per-tensor W, per-token A"),
    ):
        r = measure_smoke_gap(scheme=scheme, quantize_activations=activations)
        print(
            f"{label}: {r['tokens']} sampled tokens ({r['prompts']} prompts), {r['quantized_linears']} linears; "
            f"mean |p_engine - p_trainer| = {r['mean_abs_prob_gap']:.3e} (max {r['max_abs_prob_gap']:.3e}); "
            f"mean |dlogp| = {r['mean_abs_logprob_gap']:.3e}; share p_trainer/p_engine > C={r['tis_cap']:g}: "
            f"{r['tis_capped_share']:.3%} (ratio range {r['min_ratio']:.4f}..{r['max_ratio']:.4f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
