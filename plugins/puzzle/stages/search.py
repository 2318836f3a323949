"""Stage ``search`` (Llama-Nemotron §2): the MIP (``search.py``) over ``scores.parquet``
under the configured budgets, the params budget snapped to the uniform FFN pruning that fits it,
the optimum assembled and evaluated into ``search.json``, then the Pareto front (``pareto.py``)."""

from __future__ import annotations

import json
import time

import numpy as np

from reasonrl.plugins.puzzle import costs as cost_model
from reasonrl.plugins.puzzle.context import PuzzleContext
from reasonrl.plugins.puzzle.stages.common import assemble, evaluate
from reasonrl.plugins.puzzle.stages.pareto import write_pareto

FRACTIONS = {"params": "params_fraction", "kv_bytes": "kv_fraction", "latency_s": "latency_fraction"}


def stage_search(ctx: PuzzleContext) -> None:
    from reasonrl.plugins.puzzle.search import InfeasibleBudget, pareto_front, solve

    path = ctx.run_dir / "search.json"
    if path.exists():
        return
    s = ctx.settings
    quality, resources, fixed, pairs = search_problem(ctx)
    budgets = parent_budgets(ctx, resources, fixed)
    parent_params = sum(p.numel() for p in ctx.parent.parameters())
    uniform = None
    smallest = {name: float(resources[name].min(axis=1).sum()) for name in budgets}
    for name, budget in budgets.items():
        if budget < smallest[name]:
            fraction = FRACTIONS[name]
            raise InfeasibleBudget(
                f"{fraction} = {getattr(s, fraction)} is below the smallest model this library can build "
                f"({name} {budget + (fixed if name == 'params' else 0):.4g} < {smallest[name] + (fixed if name == 'params' else 0):.4g})"
            )
    if "params" in budgets:
        # the baseline: uniform FFN pruning, the widest that fits; the search gets exactly its
        # parameter count, so the two children are compared at the same budget
        uniform = uniform_baseline(ctx, int(budgets["params"] + fixed))
        if uniform is None:
            ctx.log("search: no uniform FFN pruning of this menu fits the parameter budget: no baseline")
        else:
            budgets["params"] = float(uniform["params"] - fixed)
    fusion = fusion_terms(ctx, pairs) if s.ffn_fusion else {}
    start = time.perf_counter()
    solution = solve(quality, resources, budgets, **fusion)
    seconds = time.perf_counter() - start
    choice = [pairs[j] for j in solution.choice]
    child = assemble(ctx, choice)
    child_params = sum(p.numel() for p in child.parameters())
    result = {
        "budgets": budgets,
        "choice": [[a.name, f.name] for a, f in choice],
        "estimated_quality": solution.quality,
        "resources": solution.resources,
        "solve_seconds": seconds,
        "parent_params": parent_params,
        "child_params": child_params,
        "child": evaluate(ctx, child, ctx.parent_logits),
        "parent": evaluate(ctx, ctx.parent, ctx.parent_logits),
    }
    result["uniform"] = uniform
    path.write_text(json.dumps(result, indent=1))
    ctx.log(
        f"search: child at {child_params / parent_params:.1%} of the parent's parameters, held-out LM loss {result['child']['lm_loss']:.4f}, "
        f"KL to the parent {result['child']['kl']:.4f} (parent LM loss {result['parent']['lm_loss']:.4f})"
    )
    if uniform:
        ctx.log(
            f"search: uniform pruning ({uniform['variant']} in every layer) at {uniform['params'] / parent_params:.1%}: "
            f"held-out LM loss {uniform['lm_loss']:.4f}, KL {uniform['kl']:.4f}"
        )
    write_pareto(ctx, pareto_front(quality, resources, "params", points=s.pareto_points), pairs, fixed, parent_params)


def search_problem(ctx: PuzzleContext):
    """(quality, resources, fixed parameters outside the layers, layer variants) of the MIP."""
    import pandas as pd

    scores = pd.read_parquet(ctx.run_dir / "scores.parquet")
    pairs = ctx.menu.layer_variants()
    layers = ctx.parent_config.num_hidden_layers
    metric = "kl" if ctx.settings.quality == "kl" else "lm_loss_delta"
    table = {(r.layer, r.part, r.variant): r for r in scores.itertuples()}
    quality = np.zeros((layers, len(pairs)))
    resources = {name: np.zeros((layers, len(pairs))) for name in ("params", "kv_bytes", "latency_s")}
    for layer in range(layers):
        for j, (a, f) in enumerate(pairs):
            ra, rf = table[(layer, "attention", a.name)], table[(layer, "ffn", f.name)]
            quality[layer, j] = max(getattr(ra, metric), 0.0) + max(getattr(rf, metric), 0.0)
            for name in resources:
                resources[name][layer, j] = getattr(ra, name) + getattr(rf, name)
    fixed_params = sum(v.numel() for k, v in ctx.parent.state_dict().items() if not k.startswith("model.layers."))
    return quality, resources, fixed_params, pairs


def parent_budgets(ctx: PuzzleContext, resources, fixed_params) -> dict[str, float]:
    """The configured fractions of the parent's totals (params counted with the fixed ones)."""
    s = ctx.settings
    parent_index = ctx.menu.layer_variants().index(ctx.parent_choice()[0])
    totals = {name: float(array[:, parent_index].sum()) for name, array in resources.items()}
    budgets = {}
    if s.params_fraction is not None:
        budgets["params"] = s.params_fraction * (totals["params"] + fixed_params) - fixed_params
    if s.kv_fraction is not None:
        budgets["kv_bytes"] = s.kv_fraction * totals["kv_bytes"]
    if s.latency_fraction is not None:
        budgets["latency_s"] = s.latency_fraction * totals["latency_s"]
    return budgets


def fusion_terms(ctx: PuzzleContext, pairs) -> dict:
    """FFN Fusion priced into the search: FFN-only variants fuse with an FFN-only predecessor,
    saving one subblock's fixed latency overhead."""
    layers = ctx.parent_config.num_hidden_layers
    fusable = np.array([[a.kind == "no_op" and f.kind == "ffn" for a, f in pairs]] * layers)
    return {
        "fusable": fusable,
        "fusion_saving": {"latency_s": cost_model.Hardware(**ctx.settings.hardware).subblock_overhead_s},
    }


def uniform_baseline(ctx: PuzzleContext, budget_params: int) -> dict | None:
    """The same FFN variant in every layer (parent attention): the widest that fits (None: none does)."""
    a = ctx.parent_choice()[0][0]
    for f in sorted((f for f in ctx.menu.ffn if f.kind == "ffn"), key=lambda f: -f.size):
        child = assemble(ctx, [(a, f)] * ctx.parent_config.num_hidden_layers)
        params = sum(p.numel() for p in child.parameters())
        if params <= budget_params:
            return {"variant": f.name, "params": params, **evaluate(ctx, child, ctx.parent_logits)}
    return None
