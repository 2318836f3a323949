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
Distillation is NeMo's own ``llm.distill`` (its trainer, megatron's optimizer, ModelOpt's KD
loss), trained on CPU inside ``nemo_cpu.training_on_cpu()``. Every command prints its result as
one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import lightning.pytorch as pl
import nemo.collections.llm as llm
import torch
from nemo.collections.common.tokenizers.null_tokenizer import NullTokenizer
from nemo.collections.llm.gpt.model import llama_nemotron as nemotron
from nemo.lightning import io, teardown
from nemo.lightning.io.state import _ModelState

from reasonrl.plugins.puzzle import nemo_cpu
from reasonrl.plugins.puzzle.megatron_adapter import convert_state, hf_state_from_megatron, load_weights
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
    return {
        "nemo_checkpoint": str(nemo_dir),
        "layers": len(hf_config["block_configs"]),
        "seconds": round(time.perf_counter() - started, 1),
    }


def command_export(nemo_dir: Path, hf_dir: Path) -> dict:
    """``llm.export_ckpt``: back to a nemotron-nas checkpoint."""
    started = time.perf_counter()
    llm.export_ckpt(nemo_dir, target="hf", output_path=hf_dir, overwrite=True)
    return {"hf_dir": str(hf_dir), "seconds": round(time.perf_counter() - started, 1)}


def command_logprobs(nemo_dir: Path, probe_file: Path) -> dict:
    """Next-token log-probabilities of the NeMo model on the probe's tokens against the probe's
    (transformers') log-probabilities (``engines.write_probe``)."""
    probe = torch.load(probe_file)
    log_probs = torch.log_softmax(logits(load_child(nemo_dir), probe["tokens"]), -1)
    return {"max_abs_logprob_diff": (log_probs - probe["log_probs"].float()).abs().max().item()}


class TokenWindows(torch.utils.data.Dataset):
    """Token windows (a Puzzle run's distillation data) as NeMo GPT batches; with the boolean
    attention mask megatron's local attention needs without Transformer Engine."""

    def __init__(self, windows: torch.Tensor, samples: int):
        self.windows, self.samples = windows, samples
        length = windows.shape[1] - 1
        self.mask = nemo_cpu.causal_mask(length)[0]
        self.positions = torch.arange(length)

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        window = self.windows[index % len(self.windows)]
        return {
            "tokens": window[:-1],
            "labels": window[1:],
            "loss_mask": torch.ones(len(window) - 1),
            "position_ids": self.positions,
            "attention_mask": self.mask,
        }

    def collate_fn(self, batch):  # what NeMo's GPT data modules hand their DataLoader
        return torch.utils.data.default_collate(batch)


class TokenWindowsData(llm.MockDataModule):
    """NeMo's GPT data module over the windows saved in ``tokens_file``: NeMo's MockDataModule with
    its datasets replaced (in 2.7.3 it passes ``create_attention_mask`` into the datasets' ``seed``,
    so without Transformer Engine its batches lack the mask). Module level: NeMo's checkpoint
    context records it by import path and init arguments."""

    def __init__(self, tokens_file: str, steps: int, batch: int, tokenizer=None):
        self.windows = torch.load(tokens_file)
        self.steps, self.batch = steps, batch
        super().__init__(
            seq_length=self.windows.shape[1] - 1,
            tokenizer=tokenizer,
            micro_batch_size=batch,
            global_batch_size=batch,
            num_train_samples=steps * batch,
            num_workers=0,
            pin_memory=False,
            persistent_workers=False,
        )

    def setup(self, stage: str = "") -> None:
        self._train_ds = TokenWindows(self.windows, self.steps * self.batch)
        self._validation_ds = self._test_ds = TokenWindows(self.windows[: self.batch], self.batch)


class KDLossRecorder(pl.Callback):
    """The distillation loss NeMo reports after each step (``reduced_train_loss``)."""

    def __init__(self):
        self.values = []

    def on_train_batch_end(self, trainer, *args) -> None:
        self.values.append(float(trainer.callback_metrics["reduced_train_loss"]))


def command_distill(
    teacher_dir: Path, student_dir: Path, tokens_file: Path, out_dir: Path, steps: int, lr: float, batch: int = 8
) -> dict:
    """Knowledge distillation of the child from the parent with NeMo's own path, ``llm.distill``
    (ModelOpt's logits KL, NeMo's default distillation config; Llama-Nemotron §2's global KD
    after the search): NeMo's trainer with megatron's Adam for ``steps`` steps on the token
    windows, the student saved as a NeMo checkpoint by NeMo's ModelCheckpoint and exported to
    ``out_dir`` (nemotron-nas) through ``llm.export_ckpt``."""
    from megatron.core.optimizer import OptimizerConfig
    from nemo import lightning as nl

    losses = KDLossRecorder()
    work = out_dir.parent / f".{out_dir.name}.nemo_logs"
    shutil.rmtree(work, ignore_errors=True)
    student_tokenizer = io.load_context(student_dir / "context", subpath="model").tokenizer
    trainer = nl.Trainer(
        devices=1,
        accelerator="cpu" if not torch.cuda.is_available() else "gpu",
        max_steps=steps,
        limit_val_batches=0,
        val_check_interval=steps,
        log_every_n_steps=1,
        num_sanity_val_steps=0,
        strategy=nl.MegatronStrategy(ckpt_async_save=False, ckpt_load_strictness="log_all"),
        plugins=nl.MegatronMixedPrecision(precision="32"),
        callbacks=[losses],
    )
    optimizer = nl.MegatronOptimizerModule(
        OptimizerConfig(
            optimizer="adam",
            lr=lr,
            use_distributed_optimizer=False,
            bf16=False,
            fp16=False,
            params_dtype=torch.float32,
            clip_grad=0.0,
        )
    )
    checkpoint = nl.ModelCheckpoint(
        save_last=True, save_top_k=0, every_n_train_steps=steps, monitor="reduced_train_loss"
    )
    started = time.perf_counter()
    try:
        with nemo_cpu.training_on_cpu():
            llm.distill(
                student_model_path=str(student_dir),
                teacher_model_path=str(teacher_dir),
                data=TokenWindowsData(str(tokens_file), steps, batch, student_tokenizer),
                trainer=trainer,
                optim=optimizer,
                tokenizer="data",
                log=nl.NeMoLogger(log_dir=str(work), name="kd", ckpt=checkpoint),
            )
        last = sorted(work.rglob("*-last"))
        if not last:
            raise NemoAdapterError(f"{work}: NeMo saved no last checkpoint")
        llm.export_ckpt(last[-1], target="hf", output_path=out_dir, overwrite=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    window = max(1, min(5, steps // 3))
    return {
        "steps": len(losses.values),
        "lr": lr,
        "kd_loss_first": sum(losses.values[:window]) / window,  # means over the first / last few steps
        "kd_loss_last": sum(losses.values[-window:]) / window,
        "seconds": round(time.perf_counter() - started, 1),
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
