"""The export stage's NeMo target (``reasonrl puzzle export --target nemo``; issue 25, Llama-Nemotron
§2): the child imported into NeMo 2.7.3 (``child_nemo/``, a NeMo-2 checkpoint), checked there —
NeMo's log-probabilities against transformers' on held-out tokens, and the export back to a
nemotron-nas checkpoint (``child_from_nemo/``) tensor for tensor — and, with
``nemo_distill_steps``, distilled from the parent by NeMo's own ``llm.distill`` (ModelOpt's logits
KL, as Nemotron did after the search) into ``child_nemo_distilled/``, with KL(parent ‖ child) on held-out tokens before
and after measured in transformers. One process in ``.venv-nemo`` does the NeMo side
(``nemo_side``); results in ``nemo.json``."""

from __future__ import annotations

import json

import torch

from reasonrl.plugins.puzzle.context import PuzzleContext
from reasonrl.plugins.puzzle.settings import PuzzleError

#: NeMo's log-probabilities must equal transformers' within this (as megatron-core's and vLLM's do)
LOGPROB_TOLERANCE = 1e-4


def parent_as_nemotron_nas(ctx: PuzzleContext):
    """The parent in the child's format (every block the parent's own), so that NeMo's
    Llama-Nemotron model holds teacher and student alike."""
    from reasonrl.plugins.puzzle.stages.common import assemble

    return assemble(ctx, ctx.parent_choice())


@torch.no_grad()
def heldout_kl(ctx: PuzzleContext, child_dir) -> float:
    """KL(parent ‖ child) per token on the held-out windows, the child loaded by transformers."""
    from transformers import AutoModelForCausalLM

    from reasonrl.plugins.puzzle.model import register_with_transformers
    from reasonrl.plugins.puzzle.stages.common import evaluate

    register_with_transformers()
    child = AutoModelForCausalLM.from_pretrained(child_dir, torch_dtype=torch.float32).to(ctx.settings.device).eval()
    return evaluate(ctx, child, ctx.parent_logits)["kl"]


def stage_nemo(ctx: PuzzleContext) -> None:
    record = ctx.run_dir / "nemo.json"
    if record.exists():
        return
    from reasonrl.plugins.puzzle import nemo_side
    from reasonrl.plugins.puzzle.engines import PROBE, write_probe

    child = ctx.run_dir / "child"
    nemo_side.read_export(child)
    write_probe(child, ctx.data["heldout"][:2].cpu())
    steps = ctx.settings.nemo_distill_steps
    teacher = ctx.run_dir / "parent_nas"
    tokens = ctx.run_dir / "nemo_distill_tokens.pt"
    if steps:
        parent_as_nemotron_nas(ctx).save_pretrained(teacher)
        torch.save(ctx.data["distill"].cpu(), tokens)
    ctx.log("export: importing the child into NeMo (.venv-nemo) ...")
    result = nemo_side.nemo_round_trip(
        child,
        ctx.run_dir / "child_nemo",
        probe_file=child / PROBE,
        back_dir=ctx.run_dir / "child_from_nemo",
        distill=(
            teacher,
            ctx.run_dir / "parent_nemo",
            tokens,
            ctx.run_dir / "child_nemo_distilled",
            steps,
            ctx.settings.nemo_distill_lr,
        )
        if steps
        else None,
    )
    if steps:
        result["kl_before"] = heldout_kl(ctx, child)
        result["kl_after"] = heldout_kl(ctx, ctx.run_dir / "child_nemo_distilled")
    record.write_text(json.dumps(result, indent=1))
    ctx.log(
        f"export: NeMo runs the child ({result['nemo_checkpoint']}); largest |Δ log p| vs transformers "
        f"{result['max_abs_logprob_diff']:.2e}; back to nemotron-nas: "
        f"{'identical' if result['round_trip_identical'] else 'DIFFERENT'} tensors"
        + (
            f"; KD from the parent in NeMo, {steps} steps: KL(parent‖child) on held-out tokens {result['kl_before']:.2e} → {result['kl_after']:.2e}"
            if steps
            else ""
        )
    )
    if result["max_abs_logprob_diff"] > LOGPROB_TOLERANCE or not result["round_trip_identical"]:
        raise PuzzleError(f"NeMo does not reproduce the child: {record}")
