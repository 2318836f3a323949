"""``reasonrl rpo offline|online``: RPO training from the command line (Llama-Nemotron §6.2).

- ``offline``: RPO on preference pairs that carry the reward model's scores (a parquet or JSONL with
  ``prompt, chosen, rejected, reward_chosen, reward_rejected``);
- ``online``: iterations of sample → score with a reward model → best/worst pairs → train, the trained
  policy the next iteration's reference. The reward model is a Hugging Face sequence-classification
  checkpoint with one label (a score head), asked as verl's reward-model server asks it: the
  conversation (question, response) through the reward model's chat template, the head's raw score.

Both write the trained policy (``save_pretrained``) and ``rpo_log.jsonl`` (per step: loss, margin,
reward-weighted margin; online: per iteration, the mean reward and the number of pairs) to ``--out``.
Inputs are checked before a model loads; a bad one is named (exit 2).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from reasonrl.contracts import CliCommand
from reasonrl.errors import UserError
from reasonrl.input_checks import check_checkpoint, check_numbers

PAIR_COLUMNS = ("prompt", "chosen", "rejected", "reward_chosen", "reward_rejected")


def read_rows(path: Path, option: str, columns: tuple[str, ...]) -> list[dict]:
    """Rows of a parquet or JSONL file holding ``columns``, else UserError naming the file and option."""
    if not path.is_file():
        raise UserError(path, f"no such file ({option})")
    try:
        if path.suffix == ".parquet":
            import pandas as pd

            rows = pd.read_parquet(path).to_dict("records")
        else:
            rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except Exception as error:  # pyarrow's / json's errors: not that format, or damaged
        raise UserError(path, f"not a readable parquet or JSONL file ({option}): {error}") from None
    if not rows:
        raise UserError(path, f"has no rows ({option})")
    missing = [c for c in columns if c not in rows[0]]
    if missing:
        raise UserError(path, f"has no column {missing[0]!r} ({option} needs {', '.join(columns)})")
    return rows


def question_and_prompt(tokenizer, prompt) -> tuple[str, str]:
    """(the question as the reward model sees it, the text the policy continues): a verl RL row's
    chat messages go through the policy's chat template; a plain string is used as it is."""
    if isinstance(prompt, str):
        return prompt, prompt
    messages = [dict(m) for m in prompt]
    question = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    return question, tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def reward_model_scorer(path: Path):
    """``score(question, response) -> float``: the reward model's head on the conversation."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.float32).eval()
    if model.config.num_labels != 1:
        raise UserError(path, f"a reward model has one score (num_labels 1), this one {model.config.num_labels}")

    @torch.no_grad()
    def score(question: str, response: str) -> float:
        messages = [{"role": "user", "content": question}, {"role": "assistant", "content": response}]
        text = tokenizer.apply_chat_template(messages, tokenize=False)
        return float(model(**tokenizer(text, return_tensors="pt")).logits[0, 0])

    return score


def _configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    offline = sub.add_parser("offline", help="RPO on scored preference pairs")
    offline.add_argument("--pairs", type=Path, required=True, help=f"parquet or JSONL: {', '.join(PAIR_COLUMNS)}")
    online = sub.add_parser("online", help="iterations of sample, score with a reward model, pair, train")
    online.add_argument("--prompts", type=Path, required=True, help="parquet or JSONL with a prompt column")
    online.add_argument("--reward-model", type=Path, required=True, help="sequence-classification checkpoint")
    online.add_argument("--iterations", type=int, default=1)
    online.add_argument("--n", type=int, default=8, help="samples per prompt (at least 2)")
    online.add_argument("--max-new-tokens", type=int, default=256)
    for each in (offline, online):
        each.add_argument("--model", type=Path, required=True, help="the starting policy (and first reference)")
        each.add_argument("--out", type=Path, required=True, help="folder for the trained policy and rpo_log.jsonl")
        each.add_argument("--beta", type=float, default=0.1, help="β of the implicit reward (Nemotron gives none)")
        each.add_argument("--eta", type=float, default=1.0, help="η, the reward model's scale in the target")
        each.add_argument("--lr", type=float, default=1e-6)
        each.add_argument("--steps", type=int, default=100, help="optimizer steps (per iteration, online)")
        each.add_argument("--batch-size", type=int, default=16)
        each.add_argument("--seed", type=int, default=0)


def _settings(args: argparse.Namespace):
    from reasonrl.plugins.model_rewards.rpo_train import RpoSettings

    checks = [
        ("--beta", args.beta, args.beta > 0, "> 0"),
        ("--eta", args.eta, args.eta > 0, "> 0"),
        ("--lr", args.lr, args.lr > 0, "> 0"),
        ("--steps", args.steps, args.steps >= 1, ">= 1"),
        ("--batch-size", args.batch_size, args.batch_size >= 1, ">= 1"),
    ]
    if args.action == "online":
        checks += [
            ("--iterations", args.iterations, args.iterations >= 1, ">= 1"),
            ("--n", args.n, args.n >= 2, ">= 2"),
            ("--max-new-tokens", args.max_new_tokens, args.max_new_tokens >= 1, ">= 1"),
        ]
    check_numbers(checks)
    return RpoSettings(
        beta=args.beta, eta=args.eta, lr=args.lr, steps=args.steps, batch=args.batch_size, seed=args.seed
    )


def _run(args: argparse.Namespace) -> int:
    settings = _settings(args)
    check_checkpoint(args.model, "--model")
    if args.action == "offline":
        rows = read_rows(args.pairs, "--pairs", PAIR_COLUMNS)
    else:
        check_checkpoint(args.reward_model, "--reward-model")
        rows = read_rows(args.prompts, "--prompts", ("prompt",))
    if args.out.exists() and any(args.out.iterdir()):
        raise UserError(args.out, "exists and is not empty (--out): a trained policy is never overwritten")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reasonrl.plugins.model_rewards.rpo_train import PreferencePair, online, train_offline

    torch.manual_seed(settings.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    policy = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    if args.action == "offline":
        pairs = [PreferencePair(*(r[c] for c in ("prompt", "chosen", "rejected")), float(r["reward_chosen"]),
                                float(r["reward_rejected"])) for r in rows]  # fmt: skip
        reference = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
        records = train_offline(policy, reference, tokenizer, pairs, settings)
    else:
        asked = dict(question_and_prompt(tokenizer, r["prompt"])[::-1] for r in rows)  # prompt text -> question
        score = reward_model_scorer(args.reward_model)
        records = online(
            policy, tokenizer, list(asked), lambda prompt, response: score(asked[prompt], response),
            args.iterations, args.n, settings, args.max_new_tokens,
        )  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    (args.out / "rpo_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    print(f"[rpo] {args.action}: trained policy in {args.out} (log: rpo_log.jsonl)")
    return 0


RPO_COMMAND = CliCommand(
    "rpo", "RPO training, offline on scored pairs or online against a reward model", _configure, _run
)
