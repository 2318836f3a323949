"""``reasonrl mtp build-toy | attach | replicate``.

* ``build-toy --out DIR``: the predictable-future toy task and a tiny MiMo model with one MTP
  layer trained on it (MiMo's objective and λ schedule) — ``DIR/model``, ``DIR/{train,held_out}.jsonl``.
* ``attach --checkpoint DIR --layers N --data T.jsonl --held-out H.jsonl --out OUT``: a Qwen2
  checkpoint as MiMo with N new MTP layers trained on T with the main model frozen.
* ``replicate --checkpoint DIR --layers K --data T.jsonl --held-out H.jsonl --out OUT``: copy MTP
  layer 1 into K layers, train layers 2..K with the main model and layer 1 frozen, save, and print
  per-layer acceptance on the held-out sequences (MiMo §2.3).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from reasonrl.contracts import CliCommand
from reasonrl.errors import UserError


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("build-toy", "attach", "replicate"))
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument(
        "--checkpoint",
        type=Path,
        help="attach: a Qwen2 checkpoint; replicate: a MiMo-layout checkpoint with >= 1 MTP layer",
    )
    parser.add_argument(
        "--layers", type=int, default=3, help="attach: new MTP layers; replicate: layers after replication (MiMo: 3)"
    )
    parser.add_argument(
        "--data",
        type=Path,
        help="attach, replicate: training sequences (JSONL: input_ids or text); "
        "for the smoke model: reasonrl smoke sequences --out DIR",
    )
    parser.add_argument("--held-out", type=Path, help="attach, replicate: held-out sequences for the acceptance report")
    parser.add_argument("--prompt-length", type=int, default=0, help="acceptance counts positions from here on")
    parser.add_argument(
        "--steps", type=int, default=None, help="training steps (build-toy 1500, attach and replicate 300)"
    )
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)


def _load(checkpoint: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reasonrl.plugins.mtp.hf_model import register_with_transformers

    register_with_transformers()
    try:
        tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    except (OSError, ValueError):
        tokenizer = None
    return AutoModelForCausalLM.from_pretrained(checkpoint), tokenizer


def _train_save_report(
    model,
    tokenizer,
    data: Path,
    held_out: Path,
    out: Path,
    steps: int,
    lr: float,
    prompt_length: int,
    seed: int,
    log,
    train_depths: tuple[int, ...] | None,
) -> dict:
    """Train the chosen MTP layers on a frozen main model, save, report held-out acceptance."""
    from reasonrl.plugins.mtp.training import acceptance, read_sequences, train

    train(
        model,
        read_sequences(data, tokenizer),
        steps,
        lr=lr,
        train_main=False,
        train_depths=train_depths,
        main_in_loss=False,
        seed=seed,
        log=log,
    )
    model.save_pretrained(out)
    if tokenizer is not None:
        tokenizer.save_pretrained(out)
    report = acceptance(model, read_sequences(held_out, tokenizer), prompt_length=prompt_length)
    (Path(out) / "acceptance.json").write_text(json.dumps(report, indent=1))
    return report


def replicate_checkpoint(
    checkpoint: Path,
    layers: int,
    data: Path,
    held_out: Path,
    out: Path,
    steps: int = 300,
    lr: float = 3e-3,
    prompt_length: int = 0,
    seed: int = 0,
    log=print,
) -> dict:
    """MiMo §2.3: layer 1 copied into ``layers`` layers; layers 2..k trained, the rest frozen."""
    from reasonrl.plugins.mtp.training import replicate

    model, tokenizer = _load(checkpoint)
    if not hasattr(model.model, "mtp_layers"):
        raise ValueError(f"{checkpoint}: not a MiMo-layout checkpoint (model_type {model.config.model_type!r})")
    replicate(model, layers)
    return _train_save_report(
        model, tokenizer, data, held_out, out, steps, lr, prompt_length, seed, log, tuple(range(2, layers + 1))
    )


def attach_checkpoint(
    checkpoint: Path,
    layers: int,
    data: Path,
    held_out: Path,
    out: Path,
    steps: int = 300,
    lr: float = 3e-3,
    prompt_length: int = 0,
    seed: int = 0,
    log=print,
) -> dict:
    """A Qwen2 checkpoint in MiMo's layout with ``layers`` new MTP layers trained on a frozen main model."""
    import torch

    from reasonrl.plugins.mtp.hf_model import to_mimo

    model, tokenizer = _load(checkpoint)
    torch.manual_seed(seed)
    return _train_save_report(
        to_mimo(model, layers), tokenizer, data, held_out, out, steps, lr, prompt_length, seed, log, None
    )


def print_acceptance(report: dict) -> None:
    for k, (alone, chained) in enumerate(zip(report["independent"], report["chained"]), start=1):
        print(f"MTP layer {k}: acceptance {alone:.3f} (chained with layers < {k} and the main model: {chained:.3f})")


def _run(args: argparse.Namespace) -> int:
    try:
        if args.action == "build-toy":
            from reasonrl.plugins.mtp import toy

            toy.build(args.out, steps=args.steps or 1500, seed=args.seed)
            print(f"toy MiMo checkpoint: {args.out / 'model'}; data: {args.out}/train.jsonl, held_out.jsonl")
            return 0
        missing = [name for name in ("checkpoint", "data", "held_out") if getattr(args, name) is None]
        if missing:
            raise ValueError(f"{args.action} needs --{', --'.join(name.replace('_', '-') for name in missing)}")
        for name in ("checkpoint", "data", "held_out"):
            if not getattr(args, name).exists():
                option = "--" + name.replace("_", "-")
                raise UserError(option, f"{getattr(args, name)}: no such file or folder")
        command = attach_checkpoint if args.action == "attach" else replicate_checkpoint
        report = command(
            args.checkpoint,
            args.layers,
            args.data,
            args.held_out,
            args.out,
            args.steps or 300,
            args.lr,
            args.prompt_length,
            args.seed,
        )
        print_acceptance(report)
        return 0
    except ValueError as error:
        print(f"reasonrl mtp: {error}", file=sys.stderr)
        return 2


MTP_COMMAND = CliCommand(
    "mtp",
    "multi-token prediction: toy MiMo checkpoint, layer replication + per-layer acceptance (MiMo §2.2-2.3)",
    _configure,
    _run,
)
