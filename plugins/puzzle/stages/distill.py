"""Stage ``distill`` (Llama-Nemotron §2): blockwise local distillation (``distill.py``)
of every library subblock into ``library/distilled/``, layer by layer (Ray tasks when
``workers > 1``), resuming subblock by subblock."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from reasonrl.plugins.puzzle.context import PuzzleContext
from reasonrl.plugins.puzzle.distill import distill_layer
from reasonrl.plugins.puzzle.settings import PuzzleSettings
from reasonrl.plugins.puzzle.stages.common import load_subblock, save_subblock, trained_subblocks
from reasonrl.plugins.puzzle.subblocks import AttentionContext, subblock

#: one log line per layer: `` 75%|███████████████     | 21/28 subblocks [00:01<00:08]``
DISTILL_METER = "{percentage:3.0f}%|{bar:20}| {n_fmt}/{total_fmt} subblocks [{elapsed}<{remaining}]"


def stage_distill(ctx: PuzzleContext) -> None:
    from tqdm import tqdm

    s = ctx.settings
    subblocks = trained_subblocks(ctx)
    total = len(subblocks)
    todo = [(layer, v) for layer, _, v in subblocks if not ctx.subblock_path("distilled", layer, v).exists()]
    if not todo:
        return
    layers = sorted({layer for layer, _ in todo})
    done, start = total - len(todo), time.monotonic()

    def report(layer: int, finished: int) -> None:
        nonlocal done
        done += finished
        # a log line per layer (the stages also run under Ray, whose output would break a live bar)
        meter = tqdm.format_meter(
            done, total, time.monotonic() - start, initial=total - len(todo), bar_format=DISTILL_METER
        )
        ctx.log(f"distill {meter}  layer {layer} done" + (f"  [{s.workers} Ray workers]" if s.workers > 1 else ""))

    if s.workers > 1:
        import ray

        ray.init(
            num_cpus=s.workers, num_gpus=None, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False
        )
        try:
            task = ray.remote(num_cpus=1, num_gpus=s.gpus_per_worker)(_distill_layer_task)
            pending = {task.remote(str(ctx.run_dir), s, layer): layer for layer in layers}
            while pending:
                finished, _ = ray.wait(list(pending), num_returns=1)
                report(pending.pop(finished[0]), ray.get(finished[0]))
        finally:
            ray.shutdown()
        return
    for layer in layers:
        report(layer, distill_one_layer(ctx, layer))


def distill_one_layer(ctx: PuzzleContext, layer: int) -> int:
    """Distil the layer's subblocks that have no distilled weights yet; returns how many."""
    s = ctx.settings
    missing = [
        (part, variant)
        for lay, part, variant in trained_subblocks(ctx)
        if lay == layer and not ctx.subblock_path("distilled", layer, variant).exists()
    ]
    modules = {}
    for part, variant in missing:
        module = subblock(ctx.parent_config, part, variant)
        module.load_state_dict(load_subblock(ctx.subblock_path("init", layer, variant)), strict=True)
        modules[(part, variant)] = (part, module.to(s.device))
    context = AttentionContext(ctx.parent.model, s.sequence_length)
    torch.manual_seed(s.seed + layer)
    results = distill_layer(
        ctx.parent,
        layer,
        modules,
        ctx.data["distill"],
        context,
        s.distill_steps,
        s.distill_lr,
        s.distill_batch,
        s.seed + layer,
    )
    for (part, variant), (before, after) in results.items():
        module = modules[(part, variant)][1]
        save_subblock(
            ctx.subblock_path("distilled", layer, variant),
            {k: v.detach().cpu() for k, v in module.state_dict().items()},
            {"layer": layer, "part": part, "variant": variant.name, "nmse_init": before, "nmse_distilled": after},
        )
    return len(missing)


def _distill_layer_task(run_dir: str, settings: PuzzleSettings, layer: int) -> int:
    """One Ray task: a layer distilled in a worker process, from the run directory alone."""
    return distill_one_layer(PuzzleContext(settings, Path(run_dir), log=lambda _m: None), layer)
