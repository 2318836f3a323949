"""The Puzzle pipeline (Llama-Nemotron §2, SPEC §6) in stages, each writing its artefacts into
the run directory and skipped when they are already there (resumable stage by stage):

parent → build-library → distill → score → search (+ Pareto front) → export (+ FFN Fusion).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from reasonrl.compat.transformers import set_attention_implementation
from reasonrl.plugins.puzzle import costs as cost_model
from reasonrl.plugins.puzzle.distill import distill_layer, layer_activations
from reasonrl.plugins.puzzle.library import (
    AttentionVariant,
    FfnVariant,
    Menu,
    block_config,
    ffn_channel_importance,
    least_squares,
    merge_kv_heads,
    prune_ffn,
)
from reasonrl.plugins.puzzle.subblocks import (
    AttentionContext,
    build_model,
    run_subblock,
    split_layers,
    subblock,
    subblock_state,
)

PARTS = ("attention", "ffn")


class PuzzleError(ValueError):
    """Input the pipeline cannot work with (the message names what is wrong)."""


@dataclass
class PuzzleSettings:
    parent: str = "toy"  # "toy" (built and trained here) or a Hugging Face LlamaForCausalLM folder
    toy_layers: int = 6
    toy_steps: int = 250
    menu: dict = field(
        default_factory=lambda: {
            "attention": ["parent", {"kv_heads": 2}, {"kv_heads": 1}, "linear", "no_op"],
            "ffn": [1.0, 0.75, 0.5, 0.25, "linear", "no_op"],
        }
    )
    text_files: list = field(
        default_factory=list
    )  # real parents: plain-text files for calibration / distillation / held-out
    sequence_length: int = 48
    calibration_sequences: int = 64
    distill_sequences: int = 256
    heldout_sequences: int = 64
    distill_steps: int = 150
    distill_lr: float = 2e-3
    distill_batch: int = 16
    workers: int = 1  # > 1: one Ray task per layer
    device: str = "cpu"  # where the parent, the subblocks and the data live (e.g. "cuda")
    gpus_per_worker: float = 0.0  # Ray tasks' GPU share when device is a GPU
    quality: str = "kl"  # kl | lm_loss: the search's quality cost
    batch: int = 64  # KV cache and latency are costed at batch × sequence
    sequence: int = 4096
    hardware: dict = field(default_factory=dict)
    measure_latency: bool = False
    params_fraction: float | None = 0.6  # budgets, as fractions of the parent (None: unconstrained)
    kv_fraction: float | None = None
    latency_fraction: float | None = None
    pareto_points: int = 10
    ffn_fusion: bool = True
    check_engines: bool = False  # export: run the child in megatron-core and vLLM, compare log-probs with transformers
    seed: int = 0

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "PuzzleSettings":
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(values) - known)
        if unknown:
            raise PuzzleError(f"puzzle config: unknown key {unknown[0]!r} (known: {sorted(known)})")
        settings = cls(**values)
        if settings.quality not in ("kl", "lm_loss"):
            raise PuzzleError(f"puzzle config: quality = {settings.quality!r}, allowed 'kl' or 'lm_loss'")
        for name in ("params_fraction", "kv_fraction", "latency_fraction"):
            value = getattr(settings, name)
            if value is not None and not 0 < value <= 1:
                raise PuzzleError(f"puzzle config: {name} = {value} must be in (0, 1]")
        return settings


def _log(message: str) -> None:
    print(f"[puzzle] {message}", flush=True)


def _save(path: Path, state: dict[str, torch.Tensor], meta: dict) -> None:
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    path.with_suffix(".json").write_text(json.dumps(meta))


def _load(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(path))


class Pipeline:
    def __init__(self, settings: PuzzleSettings, run_dir: Path, log: Callable[[str], None] = _log):
        self.s, self.run_dir, self.log = settings, Path(run_dir), log
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._parent = None

    # ---------------------------------------------------------------- parent and data
    def parent_dir(self) -> Path:
        return self.run_dir / "parent"

    def stage_parent(self) -> None:
        target = self.parent_dir()
        if (target / "config.json").exists():
            return
        if self.s.parent == "toy":
            from reasonrl.plugins.puzzle.toy import train_parent

            self.log(f"training the toy parent ({self.s.toy_layers} layers, {self.s.toy_steps} steps)")
            train_parent(
                steps=self.s.toy_steps, layers=self.s.toy_layers, seed=self.s.seed, log=self.log
            ).save_pretrained(target)
        else:
            check_llama_parent(self.s.parent)
            target.mkdir(parents=True)
            (target / "SOURCE").write_text(str(Path(self.s.parent).resolve()))

    def parent_path(self) -> Path:
        source = self.parent_dir() / "SOURCE"
        return Path(source.read_text()) if source.exists() else self.parent_dir()

    def parent(self):
        """The parent as a heterogeneous model with every block the parent's (same weights)."""
        if self._parent is None:
            from transformers import LlamaForCausalLM

            llama = LlamaForCausalLM.from_pretrained(self.parent_path(), torch_dtype=torch.float32)
            self.parent_config = llama.config
            set_attention_implementation(self.parent_config, "sdpa")
            self.menu = Menu.from_config(self.s.menu, llama.config)
            parent_blocks = [
                block_config(
                    AttentionVariant("attention", llama.config.num_key_value_heads),
                    FfnVariant("ffn", llama.config.intermediate_size),
                    llama.config.num_attention_heads,
                    llama.config.hidden_size,
                )
            ] * llama.config.num_hidden_layers
            self._parent = build_model(
                llama.config, parent_blocks, *split_layers(llama.state_dict(), llama.config.num_hidden_layers)
            ).to(self.s.device)
        return self._parent

    def data(self) -> dict[str, torch.Tensor]:
        path = self.run_dir / "data.pt"
        if not path.exists():
            s = self.s
            total = s.calibration_sequences + s.distill_sequences + s.heldout_sequences
            if s.parent == "toy":
                from reasonrl.plugins.puzzle.toy import corpus

                tokens = corpus(total, s.sequence_length, seed=s.seed + 1)
            else:
                tokens = _text_windows(self.parent_path(), s.text_files, total, s.sequence_length)
            a, b = s.calibration_sequences, s.calibration_sequences + s.distill_sequences
            torch.save({"calibration": tokens[:a], "distill": tokens[a:b], "heldout": tokens[b:]}, path)
        return {split: tokens.to(self.s.device) for split, tokens in torch.load(path).items()}

    # ---------------------------------------------------------------- library
    def subblock_path(self, stage: str, layer: int, part: str, variant) -> Path:
        return self.run_dir / "library" / stage / f"layer{layer:03d}" / f"{variant.name}.safetensors"

    def variants(self, part: str):
        return self.menu.attention if part == "attention" else self.menu.ffn

    def is_parent_variant(self, part: str, variant) -> bool:
        config = self.parent_config
        if part == "attention":
            return variant == AttentionVariant("attention", config.num_key_value_heads)
        return variant == FfnVariant("ffn", config.intermediate_size)

    def trained_subblocks(self) -> list[tuple[int, str, Any]]:
        """(layer, part, variant) of every subblock that has weights of its own to learn."""
        parent = self.parent()
        return [
            (layer, part, v)
            for layer in range(len(parent.model.layers))
            for part in PARTS
            for v in self.variants(part)
            if not self.is_parent_variant(part, v) and v.kind != "no_op"
        ]

    def stage_build_library(self) -> None:
        parent = self.parent()
        todo = [t for t in self.trained_subblocks() if not self.subblock_path("init", *t).exists()]
        if not todo:
            return
        config = self.parent_config
        head_dim = config.hidden_size // config.num_attention_heads
        context = AttentionContext(parent.model, self.s.sequence_length)
        calibration = self.data()["calibration"]
        acts, acts_layer = None, None
        for layer, part, variant in todo:
            if acts_layer != layer:  # one layer's calibration activations at a time
                chunks = [
                    layer_activations(parent, calibration[i : i + self.s.distill_batch], layer, context)
                    for i in range(0, len(calibration), self.s.distill_batch)
                ]
                acts = {p: tuple(torch.cat([c[p][k] for c in chunks]) for k in (0, 1)) for p in PARTS}
                acts_layer = layer
            parent_layer = parent.model.layers[layer]
            state = subblock_state(parent_layer.state_dict(), part)
            inputs, outputs = acts[part]
            if variant.kind == "linear":
                norm = parent_layer.input_layernorm if part == "attention" else parent_layer.post_attention_layernorm
                with torch.no_grad():
                    weight = least_squares(norm(inputs), outputs)
                prefix = "self_attn.linear_attn" if part == "attention" else "mlp.linear_mlp"
                norm_key = "input_layernorm.weight" if part == "attention" else "post_attention_layernorm.weight"
                new = {norm_key: state[norm_key].clone(), f"{prefix}.weight": weight}
            elif part == "attention":
                new = {k: v.clone() for k, v in state.items()}
                for proj in ("k_proj", "v_proj"):
                    new[f"self_attn.{proj}.weight"] = merge_kv_heads(
                        state[f"self_attn.{proj}.weight"], config.num_key_value_heads, variant.kv_heads, head_dim
                    )
            else:
                with torch.no_grad():
                    importance = ffn_channel_importance(parent_layer.mlp, parent_layer.post_attention_layernorm(inputs))
                pruned = prune_ffn(
                    {k.removeprefix("mlp."): v for k, v in state.items() if k.startswith("mlp.")},
                    importance,
                    variant.size,
                )
                new = {
                    "post_attention_layernorm.weight": state["post_attention_layernorm.weight"].clone(),
                    **{f"mlp.{k}": v for k, v in pruned.items()},
                }
            new = {k: v.detach().cpu() for k, v in new.items()}
            module = subblock(config, part, variant)
            module.load_state_dict(new, strict=True)
            _save(
                self.subblock_path("init", layer, part, variant),
                new,
                {"layer": layer, "part": part, "variant": variant.name},
            )
        self.log(f"library: {len(todo)} subblocks initialised from the parent ({len(self.trained_subblocks())} in all)")

    # ---------------------------------------------------------------- distillation
    def stage_distill(self) -> None:
        from reasonrl.progress import bar

        total = len(self.trained_subblocks())
        todo = [t for t in self.trained_subblocks() if not self.subblock_path("distilled", *t).exists()]
        if not todo:
            return
        layers = sorted({layer for layer, _, _ in todo})
        done, start = total - len(todo), time.monotonic()

        def report(layer: int, finished: int) -> None:
            nonlocal done
            done += finished
            elapsed = time.monotonic() - start
            rate = (done - (total - len(todo))) / max(elapsed, 1e-9)
            self.log(
                f"distill {bar(done, total)} {done}/{total} subblocks ({total - done} left, "
                f"~{(total - done) / max(rate, 1e-9):.0f} s to go)  layer {layer} done"
                + (f"  [{self.s.workers} Ray workers]" if self.s.workers > 1 else "")
            )

        if self.s.workers > 1:
            import ray

            ray.init(
                num_cpus=self.s.workers,
                num_gpus=None,
                include_dashboard=False,
                ignore_reinit_error=True,
                log_to_driver=False,
            )
            try:
                task = ray.remote(num_cpus=1, num_gpus=self.s.gpus_per_worker)(_distill_layer_task)
                pending = {task.remote(str(self.run_dir), self.s, layer): layer for layer in layers}
                while pending:
                    finished, _ = ray.wait(list(pending), num_returns=1)
                    report(pending.pop(finished[0]), ray.get(finished[0]))
            finally:
                ray.shutdown()
            return
        for layer in layers:
            report(layer, self.distill_layer(layer))

    def distill_layer(self, layer: int) -> int:
        """Distil the layer's subblocks that have no distilled weights yet; returns how many."""
        missing = [
            (part, variant)
            for lay, part, variant in self.trained_subblocks()
            if lay == layer and not self.subblock_path("distilled", layer, part, variant).exists()
        ]
        modules = {}
        for part, variant in missing:
            module = subblock(self.parent_config, part, variant)
            module.load_state_dict(_load(self.subblock_path("init", layer, part, variant)), strict=True)
            modules[(part, variant)] = (part, module.to(self.s.device))
        context = AttentionContext(self.parent().model, self.s.sequence_length)
        torch.manual_seed(self.s.seed + layer)
        results = distill_layer(
            self.parent(),
            layer,
            modules,
            self.data()["distill"],
            context,
            self.s.distill_steps,
            self.s.distill_lr,
            self.s.distill_batch,
            self.s.seed + layer,
        )
        for (part, variant), (before, after) in results.items():
            module = modules[(part, variant)][1]
            _save(
                self.subblock_path("distilled", layer, part, variant),
                {k: v.detach().cpu() for k, v in module.state_dict().items()},
                {"layer": layer, "part": part, "variant": variant.name, "nmse_init": before, "nmse_distilled": after},
            )
        return len(missing)

    def subblock_weights(self, layer: int, part: str, variant) -> dict[str, torch.Tensor]:
        if self.is_parent_variant(part, variant):
            return subblock_state(self.parent().model.layers[layer].state_dict(), part)
        if variant.kind == "no_op":
            return {}
        return _load(self.subblock_path("distilled", layer, part, variant))

    # ---------------------------------------------------------------- scoring
    def assemble(self, choice: list[tuple[Any, Any]]):
        """The child for one (attention, FFN) variant pair per layer, weights from the library."""
        config = self.parent_config
        blocks = [block_config(a, f, config.num_attention_heads, config.hidden_size) for a, f in choice]
        base, _ = split_layers(self.parent().state_dict(), len(choice))
        layer_states = [
            {**self.subblock_weights(layer, "attention", a), **self.subblock_weights(layer, "ffn", f)}
            for layer, (a, f) in enumerate(choice)
        ]
        return build_model(config, blocks, base, layer_states).to(self.s.device)

    def menu_pairs(self):
        self.parent()
        return self.menu.layer_variants()

    def parent_choice(self) -> list[tuple[Any, Any]]:
        config = self.parent_config
        return [
            (AttentionVariant("attention", config.num_key_value_heads), FfnVariant("ffn", config.intermediate_size))
        ] * config.num_hidden_layers

    @torch.no_grad()
    def evaluate(self, model, reference_logits: torch.Tensor | None = None) -> dict[str, float]:
        """Held-out LM loss (next token) and mean per-token KL(parent ‖ model)."""
        tokens = self.data()["heldout"]
        logits = model(input_ids=tokens).logits[:, :-1].float()
        targets = tokens[:, 1:]
        lm_loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).item()
        out = {"lm_loss": lm_loss}
        if reference_logits is not None:
            log_p = torch.log_softmax(reference_logits, -1)
            out["kl"] = (log_p.exp() * (log_p - torch.log_softmax(logits, -1))).sum(-1).mean().item()
        return out

    def parent_logits(self) -> torch.Tensor:
        if not hasattr(self, "_parent_logits"):
            with torch.no_grad():
                self._parent_logits = self.parent()(input_ids=self.data()["heldout"]).logits[:, :-1].float()
        return self._parent_logits

    def stage_score(self) -> None:
        import pandas as pd

        path = self.run_dir / "scores.parquet"
        if path.exists():
            return
        parent = self.parent()
        config = self.parent_config
        head_dim = config.hidden_size // config.num_attention_heads
        hardware = cost_model.Hardware(**self.s.hardware)
        reference = self.parent_logits()
        base = self.evaluate(parent, reference)
        # resource costs depend on the variant's shape only: once per variant, not per layer
        resource_costs = {}
        context = AttentionContext(parent.model, self.s.sequence_length)
        probe = torch.randn(self.s.distill_batch, self.s.sequence_length, config.hidden_size, device=self.s.device)
        for part in PARTS:
            for variant in self.variants(part):
                module = subblock(config, part, variant).to(self.s.device)
                params, kind = cost_model.parameters(module), variant.kind
                kv = (
                    cost_model.kv_cache_bytes(
                        kind,
                        getattr(variant, "kv_heads", None),
                        head_dim,
                        self.s.batch,
                        self.s.sequence,
                        hardware.dtype_bytes,
                    )
                    if part == "attention"
                    else 0
                )
                costs = {
                    "params": params,
                    "kv_bytes": kv,
                    "latency_s": cost_model.decode_latency(
                        params,
                        kind if part == "attention" else "ffn",
                        config.num_attention_heads,
                        head_dim,
                        kv,
                        self.s.batch,
                        self.s.sequence,
                        hardware,
                    ),
                }
                if self.s.measure_latency:
                    costs["measured_latency_s"] = (
                        cost_model.measured_latency(lambda x, m=module, p=part: run_subblock(m, p, x, context), probe)
                        if kind != "no_op"
                        else 0.0
                    )
                resource_costs[(part, variant)] = costs
        rows = []
        layers = len(parent.model.layers)
        for layer in range(layers):
            for part in PARTS:
                for variant in self.variants(part):
                    choice = list(self.parent_choice())
                    a, f = choice[layer]
                    choice[layer] = (variant, f) if part == "attention" else (a, variant)
                    metrics = (
                        {"kl": 0.0, "lm_loss": base["lm_loss"]}
                        if self.is_parent_variant(part, variant)
                        else self.evaluate(self.assemble(choice), reference)
                    )
                    rows.append(
                        {
                            "layer": layer,
                            "part": part,
                            "variant": variant.name,
                            "kl": metrics["kl"],
                            "lm_loss": metrics["lm_loss"],
                            "lm_loss_delta": metrics["lm_loss"] - base["lm_loss"],
                            **resource_costs[(part, variant)],
                        }
                    )
            self.log(f"score: layer {layer + 1}/{layers}")
        pd.DataFrame(rows).to_parquet(path)
        (self.run_dir / "parent_metrics.json").write_text(json.dumps(base))

    # ---------------------------------------------------------------- search
    def search_problem(self):
        """(quality, resources, fixed parameters outside the layers, layer variants) of the MIP."""
        import pandas as pd

        scores = pd.read_parquet(self.run_dir / "scores.parquet")
        pairs = self.menu_pairs()
        layers = self.parent_config.num_hidden_layers
        metric = "kl" if self.s.quality == "kl" else "lm_loss_delta"
        table = {(r.layer, r.part, r.variant): r for r in scores.itertuples()}
        quality = np.zeros((layers, len(pairs)))
        resources = {name: np.zeros((layers, len(pairs))) for name in ("params", "kv_bytes", "latency_s")}
        for layer in range(layers):
            for j, (a, f) in enumerate(pairs):
                ra, rf = table[(layer, "attention", a.name)], table[(layer, "ffn", f.name)]
                quality[layer, j] = max(getattr(ra, metric), 0.0) + max(getattr(rf, metric), 0.0)
                for name in resources:
                    resources[name][layer, j] = getattr(ra, name) + getattr(rf, name)
        fixed_params = sum(
            v.numel() for k, v in self.parent().state_dict().items() if not k.startswith("model.layers.")
        )
        return quality, resources, fixed_params, pairs

    def budgets(self, resources, fixed_params) -> dict[str, float]:
        parent_index = self.menu.layer_variants().index(self.parent_choice()[0])
        totals = {name: float(array[:, parent_index].sum()) for name, array in resources.items()}
        budgets = {}
        if self.s.params_fraction is not None:
            budgets["params"] = self.s.params_fraction * (totals["params"] + fixed_params) - fixed_params
        if self.s.kv_fraction is not None:
            budgets["kv_bytes"] = self.s.kv_fraction * totals["kv_bytes"]
        if self.s.latency_fraction is not None:
            budgets["latency_s"] = self.s.latency_fraction * totals["latency_s"]
        return budgets

    def stage_search(self) -> None:
        from reasonrl.plugins.puzzle.search import InfeasibleBudget, pareto_front, solve

        path = self.run_dir / "search.json"
        if path.exists():
            return
        quality, resources, fixed, pairs = self.search_problem()
        budgets = self.budgets(resources, fixed)
        parent_params = sum(p.numel() for p in self.parent().parameters())
        uniform = None
        smallest = {name: float(resources[name].min(axis=1).sum()) for name in budgets}
        for name, budget in budgets.items():
            if budget < smallest[name]:
                fraction = {"params": "params_fraction", "kv_bytes": "kv_fraction", "latency_s": "latency_fraction"}[
                    name
                ]
                raise InfeasibleBudget(
                    f"{fraction} = {getattr(self.s, fraction)} is below the smallest model this library can build "
                    f"({name} {budget + (fixed if name == 'params' else 0):.4g} < {smallest[name] + (fixed if name == 'params' else 0):.4g})"
                )
        if "params" in budgets:
            # the baseline: uniform FFN pruning, the widest that fits; the search gets exactly its
            # parameter count, so the two children are compared at the same budget
            uniform = self.uniform_baseline(int(budgets["params"] + fixed))
            if uniform is None:
                self.log("search: no uniform FFN pruning of this menu fits the parameter budget: no baseline")
            else:
                budgets["params"] = float(uniform["params"] - fixed)
        fusion = self.fusion_terms(pairs) if self.s.ffn_fusion else {}
        start = time.perf_counter()
        solution = solve(quality, resources, budgets, **fusion)
        seconds = time.perf_counter() - start
        choice = [pairs[j] for j in solution.choice]
        child = self.assemble(choice)
        child_params = sum(p.numel() for p in child.parameters())
        result = {
            "budgets": budgets,
            "choice": [[a.name, f.name] for a, f in choice],
            "estimated_quality": solution.quality,
            "resources": solution.resources,
            "solve_seconds": seconds,
            "parent_params": parent_params,
            "child_params": child_params,
            "child": self.evaluate(child, self.parent_logits()),
            "parent": self.evaluate(self.parent(), self.parent_logits()),
        }
        result["uniform"] = uniform
        path.write_text(json.dumps(result, indent=1))
        self.log(
            f"search: child at {child_params / parent_params:.1%} of the parent's parameters, held-out LM loss {result['child']['lm_loss']:.4f}, "
            f"KL to the parent {result['child']['kl']:.4f} (parent LM loss {result['parent']['lm_loss']:.4f})"
        )
        if uniform:
            self.log(
                f"search: uniform pruning ({uniform['variant']} in every layer) at {uniform['params'] / parent_params:.1%}: "
                f"held-out LM loss {uniform['lm_loss']:.4f}, KL {uniform['kl']:.4f}"
            )
        self._pareto(
            pareto_front(quality, resources, "params", points=self.s.pareto_points), pairs, fixed, parent_params
        )

    def fusion_terms(self, pairs) -> dict:
        """FFN Fusion priced into the search: FFN-only variants fuse with an FFN-only predecessor,
        saving one subblock's fixed latency overhead."""
        layers = self.parent_config.num_hidden_layers
        fusable = np.array([[a.kind == "no_op" and f.kind == "ffn" for a, f in pairs]] * layers)
        return {
            "fusable": fusable,
            "fusion_saving": {"latency_s": cost_model.Hardware(**self.s.hardware).subblock_overhead_s},
        }

    def uniform_baseline(self, budget_params: int) -> dict | None:
        """The same FFN variant in every layer (parent attention): the widest that fits (None: none does)."""
        a = self.parent_choice()[0][0]
        best = None
        for f in sorted((f for f in self.menu.ffn if f.kind == "ffn"), key=lambda f: -f.size):
            child = self.assemble([(a, f)] * self.parent_config.num_hidden_layers)
            params = sum(p.numel() for p in child.parameters())
            if params <= budget_params:
                best = {"variant": f.name, "params": params, **self.evaluate(child, self.parent_logits())}
                break
        return best

    def _pareto(self, front, pairs, fixed: int, parent_params: int) -> None:
        import pandas as pd

        rows = []
        for solution in front:
            child = self.assemble([pairs[j] for j in solution.choice])
            rows.append(
                {
                    "params": solution.resources["params"] + fixed,
                    "params_fraction": (solution.resources["params"] + fixed) / parent_params,
                    "estimated_quality": solution.quality,
                    **self.evaluate(child, self.parent_logits()),
                }
            )
        frame = pd.DataFrame(rows)
        frame.to_parquet(self.run_dir / "pareto.parquet")
        plot_pareto(frame, self.run_dir / "pareto.png")

    # ---------------------------------------------------------------- export
    def stage_export(self) -> None:
        target = self.run_dir / "child"
        if (target / "config.json").exists():
            return
        result = json.loads((self.run_dir / "search.json").read_text())
        by_name = {(a.name, f.name): (a, f) for a, f in self.menu_pairs()}
        child = self.assemble([by_name[tuple(pair)] for pair in result["choice"]])
        child.save_pretrained(target)
        from reasonrl.plugins.puzzle.model import vllm_unsupported

        problems = vllm_unsupported(child.config.block_configs)
        engines = {"transformers": True, "megatron_core": True, "vllm": not problems, "vllm_problems": problems}
        if self.s.check_engines:
            from reasonrl.plugins.puzzle.engines import compare, write_probe

            write_probe(target, self.data()["heldout"][:2].cpu())
            for engine in ("megatron", "vllm") if engines["vllm"] else ("megatron",):
                engines[f"{engine}_max_logprob_diff"] = compare(engine, target)
                self.log(
                    f"export: {engine} runs the child; largest |Δ log p| vs transformers {engines[f'{engine}_max_logprob_diff']:.2e}"
                )
        (self.run_dir / "engines.json").write_text(json.dumps(engines, indent=1))
        self.log(
            f"export: {target}"
            + (
                ""
                if engines["vllm"]
                else f" (not for vLLM: {engines['vllm_problems'][0]}; drop 'linear' from the menu to target vLLM)"
            )
        )
        if self.s.ffn_fusion:
            self.export_fused(child, result)

    def export_fused(self, child, result: dict) -> None:
        from reasonrl.plugins.puzzle.fusion import fusable_runs, fuse

        blocks = child.config.block_configs
        runs = fusable_runs(blocks)
        report = {"runs": runs, "depth": len(blocks)}
        if runs:
            base, states = split_layers(child.state_dict(), len(blocks))
            new_blocks, new_states = fuse(blocks, states, child.config.hidden_size)
            fused = build_model(self.parent_config, new_blocks, base, new_states).to(self.s.device)
            fused.save_pretrained(self.run_dir / "child_fused")
            probe = self.data()["heldout"]
            report.update(
                fused_depth=len(new_blocks),
                child=result["child"],
                fused=self.evaluate(fused, self.parent_logits()),
                child_forward_s=cost_model.measured_latency(lambda x: child(input_ids=x), probe),
                fused_forward_s=cost_model.measured_latency(lambda x: fused(input_ids=x), probe),
            )
            self.log(
                f"FFN fusion: depth {len(blocks)} → {len(new_blocks)}, held-out LM loss {result['child']['lm_loss']:.4f} → {report['fused']['lm_loss']:.4f}"
            )
        (self.run_dir / "ffn_fusion.json").write_text(json.dumps(report, indent=1))

    STAGES = ("parent", "build-library", "distill", "score", "search", "export")

    def run(self, stages=STAGES) -> None:
        for stage in stages:
            getattr(self, "stage_" + stage.replace("-", "_"))()


def _distill_layer_task(run_dir: str, settings: PuzzleSettings, layer: int) -> int:
    return Pipeline(settings, Path(run_dir), log=lambda _m: None).distill_layer(layer)


def check_llama_parent(path: str) -> None:
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as error:
        raise PuzzleError(f"parent {path!r}: cannot read a Hugging Face config ({error})") from None
    if config.model_type != "llama":
        raise PuzzleError(
            f"parent {path!r} is model_type {config.model_type!r} ({', '.join(config.architectures or [])}): "
            "Puzzle needs a Llama-architecture parent (LlamaForCausalLM)"
        )


def _text_windows(parent_path: Path, files: list, count: int, length: int) -> torch.Tensor:
    from transformers import AutoTokenizer

    if not files:
        raise PuzzleError(
            "puzzle config: text_files is empty: a real parent needs text for calibration, distillation and the held-out set"
        )
    tokenizer = AutoTokenizer.from_pretrained(parent_path)
    ids = []
    for name in files:
        ids += tokenizer(Path(name).read_text(), add_special_tokens=False)["input_ids"]
    windows = len(ids) // length
    if windows < count:
        raise PuzzleError(f"text_files hold {windows} windows of {length} tokens; the config asks for {count}")
    return torch.tensor(ids[: count * length]).reshape(count, length)


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
