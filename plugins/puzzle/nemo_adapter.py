"""Puzzle children in NeMo 2.7.3 (issue 25; Llama-Nemotron §2: the searched child becomes a
NeMo model and is distilled from its parent there). Runs only in ``.venv-nemo`` (docs/nemo.md);
reasonrl's side (``.venv``) is ``nemo_side.py``, which starts this module as a command:

    python -m reasonrl.plugins.puzzle.nemo_adapter import   <puzzle export> <nemo checkpoint>
    python -m reasonrl.plugins.puzzle.nemo_adapter export   <nemo checkpoint> <hf dir>
    python -m reasonrl.plugins.puzzle.nemo_adapter logprobs <nemo checkpoint> <probe.pt>
    python -m reasonrl.plugins.puzzle.nemo_adapter distill  <teacher ckpt> <student ckpt> <tokens.pt> <hf dir>

(chained with ``then`` they run in one process: NeMo's import alone takes ~18 s here).

Import and export go through NeMo's own entry points (``llm.import_ckpt`` / ``llm.export_ckpt``)
and connector classes: :class:`PuzzleChildImporter` / :class:`PuzzleChildExporter` subclass NeMo's
``HFLlamaNemotronImporter`` / ``HFLlamaNemotronExporter`` and replace what the trial measured
wrong in them (docs/nemo.md §2): GQA taken from block 0 for every layer (and a crash when block
0's attention is a no-op), linear replacements never copied, layer norms mapped to Transformer
Engine names only (left at 1.0 on the local spec), the exporter's HF architecture looked up by
layer count (80 or 162 only). Weights are renamed by the megatron-core adapter's
``convert_state`` / ``hf_state_from_megatron`` and loaded by NeMo's ``apply_transforms``.
Every command prints its result as one JSON line last.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import torch
from nemo.collections.common.tokenizers.null_tokenizer import NullTokenizer
from nemo.collections.llm.gpt.model import llama_nemotron as nemotron
from nemo.lightning import io, teardown
from nemo.lightning.io.state import _ModelState

from reasonrl.plugins.puzzle import nemo_cpu
from reasonrl.plugins.puzzle.megatron_adapter import convert_state, hf_state_from_megatron
from reasonrl.plugins.puzzle.nemo_side import NemoAdapterError, read_export, rope_settings

# NeMo's checkpoint context records a tokenizer by its init arguments: track_io (as NeMo's registry
# does for its SentencePiece / tiktoken / byte-level tokenizers) makes NullTokenizer recordable
if not getattr(NullTokenizer, "_reasonrl_io_tracked", False):  # once, also when run as __main__
    io.track_io(NullTokenizer)
    NullTokenizer._reasonrl_io_tracked = True


def local_layer_spec(config):
    """megatron-core's heterogeneous layer specs without Transformer Engine (the names
    ``convert_state`` writes; NeMo's own choice, ``heterogeneous_layer_spec``, takes TE when present)."""
    from megatron.core.models.gpt.heterogeneous.heterogeneous_layer_specs import get_gpt_heterogeneous_layer_spec

    return get_gpt_heterogeneous_layer_spec(config, use_te=False)


def _vocab_divisor(vocab_size: int) -> int:
    """As NeMo's importer: the largest power of two ≤ 128 dividing the vocabulary (no padding rows)."""
    base = 128
    while vocab_size % base:
        base //= 2
    return base


def child_config(hf_config: dict):
    """NeMo's Llama-Nemotron (heterogeneous) config for a Puzzle export's config.json."""
    heads, hidden = hf_config["num_attention_heads"], hf_config["hidden_size"]
    attention = [block["attention"] for block in hf_config["block_configs"]]
    # the GQA NeMo exposes globally: the first block with real attention (per-layer GQA comes from
    # block_configs; the stock importer reads block 0 and fails when it is a no-op)
    groups = next(
        (heads // a["n_heads_in_group"] for a in attention if not a["no_op"] and not a["replace_with_linear"]), heads
    )
    rope = rope_settings(hf_config)
    bf16 = str(hf_config.get("torch_dtype") or hf_config.get("dtype")) == "bfloat16"
    return nemotron.Llama31NemotronUltra253BConfig(
        num_layers=hf_config["num_hidden_layers"],
        hidden_size=hidden,
        ffn_hidden_size=hf_config.get("intermediate_size") or 4 * hidden,
        num_attention_heads=heads,
        num_query_groups=groups,
        kv_channels=hf_config.get("head_dim") or hidden // heads,
        heterogeneous_layers_config_encoded_json=json.dumps(hf_config),
        heterogeneous_layers_config_path=None,
        transformer_layer_spec=local_layer_spec,
        rotary_base=rope["rope_theta"],
        scale_factor=rope["factor"],  # llama3 RoPE scaling; 1.0 leaves the frequencies as they are
        low_freq_factor=rope["low_freq_factor"],
        high_freq_factor=rope["high_freq_factor"],
        old_context_len=rope["original_max_position_embeddings"],
        init_method_std=hf_config.get("initializer_range", 0.02),
        layernorm_epsilon=hf_config["rms_norm_eps"],
        seq_length=hf_config["max_position_embeddings"],
        make_vocab_size_divisible_by=_vocab_divisor(hf_config["vocab_size"]),
        share_embeddings_and_output_weights=False,
        fp16=False,
        bf16=bf16,
        params_dtype=torch.bfloat16 if bf16 else torch.float32,
        **nemo_cpu.config_overrides(),
    )


def child_tokenizer(checkpoint_dir: Path, vocab_size: int):
    """The export's Hugging Face tokenizer through NeMo's wrapper; a Puzzle toy child has none
    (a synthetic language): then NeMo's NullTokenizer sized to the embedding's rows."""
    if any((checkpoint_dir / name).exists() for name in ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")):
        from nemo.collections.common.tokenizers.huggingface.auto_tokenizer import AutoTokenizer

        return AutoTokenizer(str(checkpoint_dir))
    return NullTokenizer(vocab_size - 1)  # its vocab_size is this + 1 (an end-of-document id)


def load_weights(checkpoint_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    state = {}
    for shard in sorted(checkpoint_dir.glob("*.safetensors")):
        state.update(load_file(str(shard)))
    return state


def megatron_module(model):
    """The megatron-core GPTModel inside NeMo's wrappers."""
    while hasattr(model, "module"):
        model = model.module
    return model


class PuzzleChildModel(nemotron.LlamaNemotronModel):
    """NeMo's Llama-Nemotron model; its own class only so that its ``hf`` connectors are the two
    below (NeMo registers connectors per class)."""


@io.model_importer(PuzzleChildModel, "hf")
class PuzzleChildImporter(nemotron.HFLlamaNemotronImporter):
    """NeMo's Llama-Nemotron importer, reading the export's config.json and safetensors itself
    (no transformers class is needed for ``nemotron-nas``) and mapping every layer by its own block."""

    @property
    def hf_config(self) -> dict:
        return read_export(Path(str(self)))

    @property
    def config(self):
        return child_config(self.hf_config)

    @property
    def tokenizer(self):
        return child_tokenizer(Path(str(self)), self.hf_config["vocab_size"])

    def init(self) -> PuzzleChildModel:
        return PuzzleChildModel(self.config, tokenizer=self.tokenizer)

    def apply(self, output_path: Path, trust_remote_code: bool | None = None) -> Path:
        self.trust_remote_code = False
        hf_config = self.hf_config
        target = self.init()
        # a synchronous save: the async one starts a spawn-method Manager and synchronises CUDA
        trainer = self.nemo_setup(target, ckpt_async_save=False)
        self.convert_state(load_weights(Path(str(self))), target, hf_config)
        self.nemo_save(output_path, trainer)
        teardown(trainer, target)
        return output_path

    def convert_state(self, source: dict[str, torch.Tensor], target, hf_config: dict | None = None):
        hf_config = hf_config or self.hf_config
        converted = convert_state(source, hf_config)
        unused = sorted(set(source) - set(hf_state_from_megatron(converted, hf_config)))
        if unused:
            raise NemoAdapterError(f"{Path(str(self))}: tensors no block uses: {unused[:5]}")
        # NeMo's own loader: shapes checked, no parameter left unset (meta), no extra key
        return io.apply_transforms(_ModelState(converted), target, mapping={name: name for name in converted})


@io.model_exporter(PuzzleChildModel, "hf")
class PuzzleChildExporter(nemotron.HFLlamaNemotronExporter):
    """NeMo's Llama-Nemotron exporter; the HF config is the one the import carried in the NeMo
    config (``heterogeneous_layers_config_encoded_json``), so any layer count exports."""

    def load(self):
        model, _ = self.nemo_load(str(self), cpu=True)
        return model

    def apply(self, output_path: Path, target_model_name: str | None = None) -> Path:
        model = self.load()
        module = megatron_module(model)
        hf_config = json.loads(module.config.heterogeneous_layers_config_encoded_json)
        state = {name: value for name, value in module.state_dict().items() if not name.endswith("_extra_state")}
        write_hf(Path(output_path), hf_config, hf_state_from_megatron(state, hf_config), model.tokenizer)
        return Path(output_path)


def write_hf(output_dir: Path, hf_config: dict, state: dict[str, torch.Tensor], tokenizer=None) -> None:
    """config.json + model.safetensors (+ the tokenizer when it is a Hugging Face one), written
    beside the target and renamed into place (nothing half-written on failure)."""
    from safetensors.torch import save_file

    output_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.", dir=output_dir.parent))
    try:
        (staging / "config.json").write_text(json.dumps(hf_config, indent=2) + "\n")
        save_file(
            {name: tensor.detach().cpu().contiguous() for name, tensor in state.items()},
            str(staging / "model.safetensors"),
            metadata={"format": "pt"},
        )
        hf_tokenizer = getattr(tokenizer, "tokenizer", None)
        if hasattr(hf_tokenizer, "save_pretrained"):
            hf_tokenizer.save_pretrained(str(staging))
        if output_dir.exists():
            shutil.rmtree(output_dir)
        staging.rename(output_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def load_child(nemo_dir: Path):
    """A NeMo checkpoint of a Puzzle child, through NeMo's loader (its exporter's ``nemo_load``)."""
    connector = io.load_context(nemo_dir, subpath="model").exporter("hf", nemo_dir)
    return connector.load()


@torch.no_grad()
def logits(model, tokens: torch.Tensor) -> torch.Tensor:
    module = megatron_module(model)
    positions = torch.arange(tokens.shape[1]).unsqueeze(0).expand_as(tokens)
    out = module(input_ids=tokens, position_ids=positions, attention_mask=nemo_cpu.causal_mask(tokens.shape[1]))
    vocab = json.loads(module.config.heterogeneous_layers_config_encoded_json)["vocab_size"]
    return out[..., :vocab].float()


# ---- commands -------------------------------------------------------------------------------


def command_import(child_dir: Path, nemo_dir: Path) -> dict:
    """``llm.import_ckpt``: the Puzzle export as a NeMo-2 checkpoint (written beside, then renamed)."""
    import nemo.collections.llm as llm

    hf_config = read_export(child_dir)  # before anything is written
    started = time.perf_counter()
    staging = nemo_dir.parent / f".{nemo_dir.name}.importing"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        model = PuzzleChildModel(child_config(hf_config))
        llm.import_ckpt(model=model, source=f"hf://{child_dir.resolve()}", output_path=staging, overwrite=True)
        if nemo_dir.exists():
            shutil.rmtree(nemo_dir)
        staging.rename(nemo_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    blocks = [f"{b['attention']} / {b['ffn']}" for b in hf_config["block_configs"]]
    return {"nemo_checkpoint": str(nemo_dir), "layers": len(blocks), "seconds": round(time.perf_counter() - started, 1)}


def command_export(nemo_dir: Path, hf_dir: Path) -> dict:
    """``llm.export_ckpt``: back to a nemotron-nas checkpoint."""
    import nemo.collections.llm as llm

    started = time.perf_counter()
    llm.export_ckpt(nemo_dir, target="hf", output_path=hf_dir, overwrite=True)
    return {"hf_dir": str(hf_dir), "seconds": round(time.perf_counter() - started, 1)}


def command_logprobs(nemo_dir: Path, probe_file: Path) -> dict:
    """Next-token log-probabilities of the NeMo model on the probe's tokens against the probe's
    (transformers') log-probabilities (``engines.write_probe``)."""
    probe = torch.load(probe_file)
    log_probs = torch.log_softmax(logits(load_child(nemo_dir), probe["tokens"]), -1)
    return {"max_abs_logprob_diff": (log_probs - probe["log_probs"].float()).abs().max().item()}


def masked_mean(per_token, loss_mask: torch.Tensor) -> torch.Tensor:
    """nemo/collections/llm/modelopt/distill/model.py's masked token loss (tensor and context parallel 1)."""
    per_token = per_token[0] if isinstance(per_token, tuple) else per_token
    return (per_token.reshape(-1).float() * loss_mask.reshape(-1)).sum() / loss_mask.sum()


def command_distill(
    teacher_dir: Path, student_dir: Path, tokens_file: Path, out_dir: Path, steps: int, lr: float
) -> dict:
    """Knowledge distillation of the child from the parent with NeMo's ModelOpt pieces — the ones
    ``llm.distill`` builds (``DistillationGPTModel``: ``load_distillation_config``, ``mtd.convert``
    with a ``kd_loss`` mode, ``adjust_distillation_model_for_mcore``, ``compute_kd_loss``) — with
    the optimizer step driven here: NeMo's trainer stops on CPU in megatron's schedule
    (``schedules.py:573``, a tensor on device='cuda'; docs/nemo.md §4). The student is written
    to ``out_dir`` as a nemotron-nas checkpoint."""
    import modelopt.torch.distill as mtd
    from nemo.collections.llm.modelopt.distill.utils import (
        adjust_distillation_model_for_mcore,
        load_distillation_config,
    )
    from tqdm import tqdm

    teacher_model, student_model = load_child(teacher_dir), load_child(student_dir)
    teacher, student = megatron_module(teacher_model), megatron_module(student_model)
    teacher.eval()
    student_names = [name for name in student.state_dict() if not name.endswith("_extra_state")]
    settings = load_distillation_config(None, student.config, teacher.config)  # NeMo's default: logits KL
    distiller = mtd.convert(
        student,
        mode=[
            (
                "kd_loss",
                {"teacher_model": teacher, "criterion": settings.criterion, "loss_balancer": settings.loss_balancer},
            )
        ],
    )
    adjust_distillation_model_for_mcore(distiller, distill_cfg=settings)
    optimizer = torch.optim.AdamW([p for p in distiller.parameters() if p.requires_grad], lr=lr)
    tokens = torch.load(tokens_file)
    length = tokens.shape[1]
    positions = torch.arange(length).unsqueeze(0)
    mask = nemo_cpu.causal_mask(length)
    generator = torch.Generator().manual_seed(0)
    losses = []
    distiller.train()
    for _ in tqdm(range(steps), desc="NeMo KD", unit="step", file=sys.stderr):
        batch = tokens[torch.randint(len(tokens), (8,), generator=generator)]
        loss_mask = torch.ones_like(batch, dtype=torch.float)

        lm_loss = distiller(
            input_ids=batch, position_ids=positions.expand_as(batch), attention_mask=mask, labels=batch.roll(-1, 1)
        )
        reduce = partial(masked_mean, loss_mask=loss_mask)
        kd = distiller.compute_kd_loss(student_loss=reduce(lm_loss), loss_reduction_fn=reduce)["kd_loss"]
        optimizer.zero_grad()
        kd.backward()
        optimizer.step()
        losses.append(kd.item())
    trained = distiller.state_dict()  # the student's own names, beside the teacher's
    missing = [name for name in student_names if name not in trained]
    if missing:
        raise NemoAdapterError(f"the distilled student lacks {missing[:3]}")
    hf_config = json.loads(student.config.heterogeneous_layers_config_encoded_json)
    state = {name: trained[name] for name in student_names}
    write_hf(out_dir, hf_config, hf_state_from_megatron(state, hf_config))
    window = max(1, min(5, steps // 3))
    return {
        "steps": steps,
        "lr": lr,
        "kd_loss_first": sum(losses[:window]) / window,  # means over the first / last few steps
        "kd_loss_last": sum(losses[-window:]) / window,
        "student_hf_dir": str(out_dir),
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m reasonrl.plugins.puzzle.nemo_adapter",
        description="Commands run in order in one process; chain them with 'then'.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, args in (
        ("import", ("child_dir", "nemo_dir")),
        ("export", ("nemo_dir", "hf_dir")),
        ("logprobs", ("nemo_dir", "probe_file")),
        ("distill", ("teacher_dir", "student_dir", "tokens_file", "out_dir")),
    ):
        sub = commands.add_parser(name, help=globals()[f"command_{name}"].__doc__.split("\n")[0])
        for arg in args:
            sub.add_argument(arg, type=Path)
        if name == "distill":
            sub.add_argument("--steps", type=int, default=30)
            sub.add_argument("--lr", type=float, default=3e-5)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    chain, current = [], []
    for word in argv:
        if word == "then":
            chain.append(current)
            current = []
        else:
            current.append(word)
    chain.append(current)
    parsed = [vars(_parser().parse_args(words)) for words in chain]  # every command checked before any runs
    nemo_cpu.apply()
    if any(args["command"] == "distill" for args in parsed):
        nemo_cpu.init_single_process()
    for args in parsed:
        command = args.pop("command")
        try:
            result = globals()[f"command_{command}"](**args)
        except NemoAdapterError as error:
            print(f"reasonrl nemo adapter: {error}", file=sys.stderr)
            return 2
        print(json.dumps({"command": command, **result}), flush=True)
    return 0


if __name__ == "__main__":
    # run the imported module's main, not this __main__ copy: NeMo's checkpoint context records the
    # model class by import path (reasonrl.plugins.puzzle.nemo_adapter.PuzzleChildModel)
    from reasonrl.plugins.puzzle.nemo_adapter import main as module_main

    sys.exit(module_main())
