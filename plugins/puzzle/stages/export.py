"""Stage ``export`` (Llama-Nemotron §2): the searched child as a nemotron-nas checkpoint
in ``child/`` (checked in megatron-core and vLLM with ``check_engines``, ``engines.json``) and,
with ``ffn_fusion``, its FFN-Fusion form (``fusion.py``) in ``child_fused/`` (``ffn_fusion.json``)."""

from __future__ import annotations

import json

from reasonrl.plugins.puzzle import costs as cost_model
from reasonrl.plugins.puzzle.context import PuzzleContext
from reasonrl.plugins.puzzle.stages.common import assemble, evaluate
from reasonrl.plugins.puzzle.subblocks import build_model, split_layers


def stage_export(ctx: PuzzleContext) -> None:
    export_hf(ctx)
    if ctx.settings.nemo:
        from reasonrl.plugins.puzzle.stages.nemo import stage_nemo

        stage_nemo(ctx)


def export_hf(ctx: PuzzleContext) -> None:
    target = ctx.run_dir / "child"
    if (target / "config.json").exists():
        return
    result = json.loads((ctx.run_dir / "search.json").read_text())
    by_name = {(a.name, f.name): (a, f) for a, f in ctx.menu.layer_variants()}
    child = assemble(ctx, [by_name[tuple(pair)] for pair in result["choice"]])
    child.save_pretrained(target)
    from reasonrl.plugins.puzzle.model import vllm_unsupported

    problems = vllm_unsupported(child.config.block_configs)
    engines = {"transformers": True, "megatron_core": True, "vllm": not problems, "vllm_problems": problems}
    if ctx.settings.check_engines:
        from reasonrl.plugins.puzzle.engines import compare, write_probe

        write_probe(target, ctx.data["heldout"][:2].cpu())
        for engine in ("megatron", "vllm") if engines["vllm"] else ("megatron",):
            engines[f"{engine}_max_logprob_diff"] = compare(engine, target)
            ctx.log(
                f"export: {engine} runs the child; largest |Δ log p| vs transformers {engines[f'{engine}_max_logprob_diff']:.2e}"
            )
    (ctx.run_dir / "engines.json").write_text(json.dumps(engines, indent=1))
    ctx.log(
        f"export: {target}"
        + (
            ""
            if engines["vllm"]
            else f" (not for vLLM: {engines['vllm_problems'][0]}; drop 'linear' from the menu to target vLLM)"
        )
    )
    if ctx.settings.ffn_fusion:
        export_fused(ctx, child, result)


def export_fused(ctx: PuzzleContext, child, result: dict) -> None:
    """The child with its no-attention runs fused (``child_fused/``, when there are any) and ``ffn_fusion.json``."""
    from reasonrl.plugins.puzzle.fusion import fusable_runs, fuse

    blocks = child.config.block_configs
    runs = fusable_runs(blocks)
    report = {"runs": runs, "depth": len(blocks)}
    if runs:
        base, states = split_layers(child.state_dict(), len(blocks))
        new_blocks, new_states = fuse(blocks, states, child.config.hidden_size)
        fused = build_model(ctx.parent_config, new_blocks, base, new_states).to(ctx.settings.device)
        fused.save_pretrained(ctx.run_dir / "child_fused")
        probe = ctx.data["heldout"]
        report.update(
            fused_depth=len(new_blocks),
            child=result["child"],
            fused=evaluate(ctx, fused, ctx.parent_logits),
            child_forward_s=cost_model.measured_latency(lambda x: child(input_ids=x), probe),
            fused_forward_s=cost_model.measured_latency(lambda x: fused(input_ids=x), probe),
        )
        ctx.log(
            f"FFN fusion: depth {len(blocks)} → {len(new_blocks)}, held-out LM loss {result['child']['lm_loss']:.4f} → {report['fused']['lm_loss']:.4f}"
        )
    (ctx.run_dir / "ffn_fusion.json").write_text(json.dumps(report, indent=1))
