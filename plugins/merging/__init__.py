"""merging: model fusion and weight merging of Hugging Face checkpoints.

LongCat-Flash-Thinking §3.4 (domain-parallel RL, then fusion of the experts' task vectors:
magnitude normalization, DARE drop with rescaling, SCE-style sign erasure) and Kimi k1.5 §2.4
(long2short by weight averaging).

- ``fusion.py``: the rules on tensors (framework-free; facade ``reasonrl.api.fuse_task_vectors``);
- ``safetensors_io.py`` / ``checkpoints.py``: the streaming checkpoint merge (a few tensors per
  model resident, every file validated as safetensors does, nothing written on a bad input);
- ``cli.py``: ``reasonrl merge --config merge.yaml``; ``reasonrl bench merge``: ``benchmarks/merging/``;
  ``inputs.py``: the commands' YAML read with named errors (``file:line``).
"""

from __future__ import annotations

from reasonrl.contracts import CliCommand, PluginInfo
from reasonrl.hookspecs import hookimpl


@hookimpl
def reasonrl_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="merging",
        summary="merging: LongCat's fusion of domain experts (normalize, drop, erase) and weight averaging / task "
        "arithmetic of Hugging Face checkpoints, streamed tensor by tensor",
        reports=("LongCat-Flash-Thinking §3.4", "Kimi k1.5 §2.4"),
        # rewards: its math reward scores domain-parallel's per-domain evaluation; objectives and
        # sampling: the pipeline trains its experts with LongCat's recipe, which names their options
        requires=("objectives", "rewards", "sampling"),
    )


@hookimpl
def reasonrl_cli_commands() -> list[CliCommand]:
    from reasonrl.plugins.merging.cli import MERGE_COMMAND, PIPELINE_COMMAND

    return [MERGE_COMMAND, PIPELINE_COMMAND]


@hookimpl
def reasonrl_benchmarks() -> list[CliCommand]:
    # benchmarks/merging/ of a source checkout; the installed package holds no benchmarks
    from reasonrl.source_checkout import checkout_benchmarks

    return checkout_benchmarks("merging")


@hookimpl
def reasonrl_api_functions() -> dict:
    # `reasonrl merge` applies the same rule (fusion.Fusion) to checkpoints, chunk by chunk
    from reasonrl.plugins.merging.fusion import fuse_task_vectors

    return {"fuse_task_vectors": fuse_task_vectors}
