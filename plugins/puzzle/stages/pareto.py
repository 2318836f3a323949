"""The Pareto front of the Puzzle search (Llama-Nemotron §2): every optimum of a
parameter-budget sweep assembled and evaluated, into ``pareto.parquet`` and ``pareto.png``."""

from __future__ import annotations

from pathlib import Path

from reasonrl.plugins.puzzle.context import PuzzleContext
from reasonrl.plugins.puzzle.stages.common import assemble, evaluate


def write_pareto(ctx: PuzzleContext, front, pairs, fixed: int, parent_params: int) -> None:
    import pandas as pd

    rows = []
    for solution in front:
        child = assemble(ctx, [pairs[j] for j in solution.choice])
        rows.append(
            {
                "params": solution.resources["params"] + fixed,
                "params_fraction": (solution.resources["params"] + fixed) / parent_params,
                "estimated_quality": solution.quality,
                **evaluate(ctx, child, ctx.parent_logits),
            }
        )
    frame = pd.DataFrame(rows)
    frame.to_parquet(ctx.run_dir / "pareto.parquet")
    plot_pareto(frame, ctx.run_dir / "pareto.png")


def plot_pareto(frame, out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(6.5, 4.2))
    axis.plot(frame["params_fraction"], frame["lm_loss"], "o-", label="held-out LM loss of the optimal child")
    axis.set_xlabel("parameters (fraction of the parent)")
    axis.set_ylabel("held-out LM loss")
    twin = axis.twinx()
    twin.plot(
        frame["params_fraction"],
        frame["estimated_quality"],
        "s--",
        color="tab:orange",
        alpha=0.7,
        label="MIP objective (sum of block costs)",
    )
    twin.set_ylabel("MIP objective")
    fig.legend(loc="center right", bbox_to_anchor=(0.86, 0.55), fontsize=8)
    axis.set_title("Puzzle: accuracy / parameters Pareto front")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
