"""The tiny policy: a config-made Qwen2 causal LM, briefly warm-started on the task format.

The warm start (teacher-forced cross-entropy on the answer tokens of a disjoint set of
problems) is deliberately short: the policy learns the format and some sums, so GRPO has
a learning signal (groups that are neither all right nor all wrong) and room to improve.
Deterministic: fixed seeds, one thread, deterministic algorithms; the same spec gives
byte-identical weights.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from reasonrl.smoke.arithmetic import Problem, formatted, make_problems
from reasonrl.smoke.tokenizer import CHAT_TEMPLATE, VOCABULARY, build_tokenizer


@dataclass(frozen=True)
class TinyModelSpec:
    """Everything that determines the built model (its hash names the cache folder)."""

    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4  # head_dim = 32: vLLM's CPU attention needs head_dim >= 32
    num_kv_heads: int = 2
    intermediate_size: int = 256
    max_positions: int = 64
    # Operands 0..99. Measured here (greedy accuracy on held-out plain problems, formats mixed
    # as below, lr 1e-3): 400 steps of 64 -> 5%, 480 -> 45%, 550 -> 68%, 700 -> 83%; code
    # programs exact from 480 steps. ~45% leaves GRPO both signal (sampled groups with right and
    # wrong answers) and headroom.
    max_operand: int = 99
    warmup_problems: int = 3000
    warmup_steps: int = 480
    warmup_batch: int = 64
    warmup_lr: float = 1e-3
    # The accuracy climbs steeply around warmup_steps, and where exactly depends on the CPU's
    # float kernels (an AVX-512 EPYC reached 9 % at 480 steps, not 45 %): from warmup_steps on,
    # every WARMUP_CHECK_EVERY steps, training goes on while the greedy accuracy on a check set
    # (problems neither the warm start, the RL nor the validation split holds) is below
    # warmup_target_accuracy, up to warmup_max_steps. 0 turns the check off.
    warmup_target_accuracy: float = 0.4
    warmup_max_steps: int = 800
    # Share of each warm-start batch per task format (reasonrl.smoke.arithmetic.FORMATS): the
    # recipes' own formats are learnt too (code for mimo, the thinking toggle for nemotron).
    format_mix: tuple[tuple[str, float], ...] = (
        ("plain", 0.6),
        ("thinking_on", 0.1),
        ("thinking_off", 0.1),
        ("code", 0.2),
    )
    seed: int = 0

    def digest(self) -> str:
        identity = {"spec": asdict(self), "vocabulary": VOCABULARY, "chat_template": CHAT_TEMPLATE}
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]


def model_config(spec: TinyModelSpec, tokenizer):
    """The smoke model's Qwen2 config at ``spec``'s sizes (any spec with TinyModelSpec's size fields)."""
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        intermediate_size=spec.intermediate_size,
        max_position_embeddings=spec.max_positions,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
        attn_implementation="eager",
    )


def supervised_batch(pairs: list[tuple[str, str]], tokenizer) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded prompt+answer+EOS ids, attention mask, and labels on answer+EOS only."""
    rows, labels = [], []
    for prompt_text, answer_text in pairs:
        prompt = tokenizer(prompt_text)["input_ids"]
        answer = tokenizer(answer_text)["input_ids"] + [tokenizer.eos_token_id]
        rows.append(prompt + answer)
        labels.append([-100] * len(prompt) + answer)
    width = max(map(len, rows))
    pad = tokenizer.pad_token_id
    ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    target = torch.tensor([t + [-100] * (width - len(t)) for t in labels])
    return ids, mask, target


WARMUP_CHECK_EVERY = 20
WARMUP_CHECK_PROBLEMS = 256


def warmup_problems(spec: TinyModelSpec, exclude: set[Problem]) -> tuple[list[Problem], list[Problem]]:
    """The warm start's problems, none in ``exclude``: its training pool (``spec.warmup_problems``)
    and, after it, the held-apart accuracy check set (up to ``WARMUP_CHECK_PROBLEMS``)."""
    every = make_problems((spec.max_operand + 1) ** 2, seed=spec.seed + 1, max_operand=spec.max_operand)
    rest = [p for p in every if p not in exclude]
    pool = rest[: spec.warmup_problems]
    if len(pool) < spec.warmup_problems:
        raise ValueError(f"only {len(pool)} problems left for the warm start, {spec.warmup_problems} asked")
    return pool, rest[spec.warmup_problems :][:WARMUP_CHECK_PROBLEMS]


def warmup_pool(spec: TinyModelSpec, exclude: set[Problem]) -> list[Problem]:
    """The warm start's training pool (see :func:`warmup_problems`)."""
    return warmup_problems(spec, exclude)[0]


def warmup_check_set(spec: TinyModelSpec, exclude: set[Problem]) -> list[Problem]:
    """The warm start's accuracy check set (see :func:`warmup_problems`)."""
    return warmup_problems(spec, exclude)[1]


def warm_start(model, tokenizer, spec: TinyModelSpec, exclude: set[Problem]) -> list[float]:
    """Short supervised warm start on problems not in ``exclude``; returns the loss curve (one
    entry per step: ``spec.warmup_steps``, more while the check set's accuracy is below
    ``spec.warmup_target_accuracy``, see :class:`TinyModelSpec`)."""
    pool, check_set = warmup_problems(spec, exclude)
    if spec.warmup_target_accuracy <= 0:
        check_set = []
    generator = torch.Generator().manual_seed(spec.seed)
    forms = [form for form, _share in spec.format_mix]
    shares = torch.tensor([share for _form, share in spec.format_mix], dtype=torch.float64)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.warmup_lr)
    losses = []
    model.train()
    step = 0
    while True:
        if step >= spec.warmup_steps and (step - spec.warmup_steps) % WARMUP_CHECK_EVERY == 0:
            if not check_set or step >= spec.warmup_max_steps:
                break
            model.eval()
            reached = greedy_accuracy(model, tokenizer, check_set) >= spec.warmup_target_accuracy
            model.train()
            if reached:
                break
        step += 1
        picks = torch.randint(len(pool), (spec.warmup_batch,), generator=generator).tolist()
        kinds = torch.multinomial(shares, spec.warmup_batch, replacement=True, generator=generator).tolist()
        ids, mask, target = supervised_batch([formatted(pool[i], forms[k]) for i, k in zip(picks, kinds)], tokenizer)
        loss = model(input_ids=ids, attention_mask=mask, labels=target).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def greedy_accuracy(model, tokenizer, problems: list[Problem]) -> float:
    """Fraction of problems whose greedy answer (up to EOS) is exactly right."""
    from reasonrl.smoke.arithmetic import compute_score

    texts = _answers(model, tokenizer, problems, do_sample=False)
    return sum(compute_score(None, t, p.answer) for t, p in zip(texts, problems)) / len(problems)


def _answers(model, tokenizer, problems: list[Problem], **generate) -> list[str]:
    """The model's answers (4 new tokens, special tokens dropped) to the problems' prompts, in
    order; ``num_return_sequences`` answers per problem one after another."""
    tokenizer.padding_side = "left"
    encoded = tokenizer([p.prompt for p in problems], return_tensors="pt", padding=True)
    output = model.generate(**encoded, max_new_tokens=4, pad_token_id=tokenizer.pad_token_id, **generate)
    return tokenizer.batch_decode(output[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True)


@torch.no_grad()
def greedy_format_rates(model, tokenizer, problems: list[Problem]) -> dict[str, float]:
    """Per non-plain format: fraction of problems whose greedy response is exactly the expected one."""
    from reasonrl.smoke.arithmetic import FORMATS

    tokenizer.padding_side = "left"
    rates = {}
    for form in FORMATS[1:]:
        pairs = [formatted(p, form) for p in problems]
        encoded = tokenizer([prompt for prompt, _ in pairs], return_tensors="pt", padding=True)
        output = model.generate(**encoded, max_new_tokens=32, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        texts = tokenizer.batch_decode(output[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
        rates[form] = sum(text == answer for text, (_, answer) in zip(texts, pairs)) / len(pairs)
    return rates


#: per RL (train) problem, its sampled pass rate (8 answers), in the model folder
PASS_RATES_FILE = "reasonrl_pass_rates.json"


@torch.no_grad()
def sampled_pass_rates(model, tokenizer, problems: list[Problem], samples: int = 8, seed: int = 0) -> list[float]:
    """Per problem, the share of ``samples`` answers sampled at temperature 1 that are right: the
    pre-computed pass rate of the reports' offline filters and curricula (Llama-Nemotron §5.1: 8
    responses per prompt; MiMo §3.2: 16), here from the warm-started model itself."""
    from reasonrl.smoke.arithmetic import compute_score

    torch.manual_seed(seed)
    texts = _answers(
        model, tokenizer, problems, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, num_return_sequences=samples
    )
    return [
        sum(compute_score(None, texts[i * samples + j], p.answer) for j in range(samples)) / samples
        for i, p in enumerate(problems)
    ]


def build_tiny_model(
    out_dir: Path, spec: TinyModelSpec, eval_problems: list[Problem], held_out: list[Problem] = ()
) -> dict:
    """Build, warm-start and save the model and tokenizer to ``out_dir``; return a summary.

    The warm start never sees ``eval_problems`` (the RL prompts) nor ``held_out`` (the
    validation prompts); the summary gives the greedy accuracy on both.
    """
    from transformers import Qwen2ForCausalLM

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bitwise-reproducible reductions
    try:
        with torch.random.fork_rng():
            torch.manual_seed(spec.seed)
            torch.use_deterministic_algorithms(True)
            tokenizer = build_tokenizer()
            model = Qwen2ForCausalLM(model_config(spec, tokenizer))
            losses = warm_start(model, tokenizer, spec, exclude=set(eval_problems) | set(held_out))
            accuracy = greedy_accuracy(model, tokenizer, eval_problems)
            held_out_accuracy = greedy_accuracy(model, tokenizer, list(held_out)) if held_out else None
            format_rates = greedy_format_rates(model, tokenizer, list(held_out or eval_problems)[:128])
            pass_rates = sampled_pass_rates(model, tokenizer, eval_problems, seed=spec.seed)
    finally:
        torch.use_deterministic_algorithms(False)
        torch.set_num_threads(threads)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    summary = {
        "spec": asdict(spec),
        "parameters": sum(p.numel() for p in model.parameters()),
        "warmup_loss_first": losses[0] if losses else None,
        "warmup_loss_last": losses[-1] if losses else None,
        "warmup_steps_run": len(losses),
        "greedy_accuracy_on_rl_problems": accuracy,
        "greedy_accuracy_on_validation_problems": held_out_accuracy,
        "greedy_exact_response_by_format": format_rates,
    }
    (out_dir / "reasonrl_tiny_model.json").write_text(json.dumps(summary, indent=2))
    (out_dir / PASS_RATES_FILE).write_text(json.dumps(pass_rates))
    summary["mean_sampled_pass_rate"] = sum(pass_rates) / len(pass_rates)
    return summary
