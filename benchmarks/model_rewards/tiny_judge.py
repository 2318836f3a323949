"""A judge the CPU can run: a tiny causal LM trained here to decide whether an answer to the smoke
task (two-digit addition) equals the reference, either in any surface form — digits (``46``), words
(``forty six``) or a tens-plus-units expression (``40+6``, ``6+40``) — the reference in digits (the
default spec) or, for the science-style rows (``SCIENCE_JUDGE``), in digits or words as free-form
science references are written; and to reply as the reports' generative
judges do, reasoning first: the answer in digits, the reference in digits, then the verdict
(``46 vs 46 <verdict>yes</verdict>``). It stands in for the reports' judge models in CPU runs.

A demo asset on the smoke task (so it lives in benchmarks/, beside the bench that serves it).
Built deterministically (no downloads) into a folder named by its spec's hash, with its template
file (``judge_templates.yaml``: the ``smoke_judge`` template, written in the smoke tokenizer's
characters) and ``tiny_judge.json``: its agreement with Math-Verify on held-apart pairs Math-Verify
can read (digits, expressions on both sides), and its accuracy on pairs with words on either side
(which Math-Verify cannot read).

    python -m benchmarks.model_rewards.tiny_judge --science-data DIR
        the judged nemotron data set in DIR: the smoke nemotron rows, every other one a "science"
        row whose reference is written in words (free-form: Math-Verify cannot read it, the judge decides)
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import yaml

from reasonrl.plugins.model_rewards.templates import parse_templates

#: in the smoke tokenizer's characters (lowercase, digits, ``+-=*? \n<>/`()``)
TEMPLATE = {
    "smoke_judge": {
        "source": "reasonrl's CPU stand-in for the reports' judges (LongCat §3.3, Llama-Nemotron §5.1)",
        "system": "is the fenced answer equal to the reference",
        "user": "q {question}\nref {reference}\n{open}{answer}{close}\n",
        "yes_words": ["yes"],
        "no_words": ["no"],
    }
}
FORMS = ("digits", "words", "expression")
ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


@dataclass(frozen=True)
class JudgeSpec:
    """Everything that determines the built judge (its hash names the folder)."""

    hidden_size: int = 128
    num_layers: int = 3
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 256
    max_positions: int = 256
    steps: int = 3000
    batch: int = 32
    lr: float = 1e-3
    held_apart: int = 600  # evaluation pairs, never trained on
    seed: int = 0
    #: how references are written (answers take every form of FORMS): SCIENCE_JUDGE adds words
    reference_forms: tuple[str, ...] = ("digits",)

    def digest(self) -> str:
        from reasonrl.smoke.tokenizer import CHAT_TEMPLATE, VOCABULARY

        spec = asdict(self)
        if spec["reference_forms"] == ("digits",):  # the identity of the judge built before the field existed
            del spec["reference_forms"]
        identity = {"spec": spec, "template": TEMPLATE, "vocabulary": VOCABULARY, "chat": CHAT_TEMPLATE}
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]


def words(n: int) -> str:
    """``146`` → ``one hundred forty six``."""
    hundreds, rest = divmod(n, 100)
    parts = [f"{ONES[hundreds]} hundred"] if hundreds else []
    if rest >= 20:
        parts.append(TENS[rest // 10] + (f" {ONES[rest % 10]}" if rest % 10 else ""))
    elif rest or not parts:
        parts.append(ONES[rest])
    return " ".join(parts)


def surface(n: int, form: str, rng: random.Random) -> str:
    if form == "words":
        return words(n)
    if form == "expression" and n >= 10 and n % 10:
        tens, units = n - n % 10, n % 10
        return f"{tens}+{units}" if rng.random() < 0.5 else f"{units}+{tens}"
    return str(n)


@dataclass(frozen=True)
class Pair:
    question: str
    reference: int
    answer: str
    form: str
    equal: bool
    reference_text: str = ""  # the reference as written (default: digits)

    @property
    def shown_reference(self) -> str:
        return self.reference_text or str(self.reference)


def make_pair(rng: random.Random, reference_forms: tuple[str, ...] = ("digits",)) -> Pair:
    a, b = rng.randint(0, 99), rng.randint(0, 99)
    n = a + b
    equal = rng.random() < 0.5
    m = n
    while not equal and m == n:  # near misses (±1, ±10, digits swapped) and arbitrary numbers
        m = rng.choice([n + 1, n - 1, n + 10, n - 10, int(str(n)[::-1]), rng.randint(0, 198)])
        m = m if 0 <= m <= 198 else n
    form = rng.choice(FORMS)
    reference_text = surface(n, rng.choice(reference_forms), rng)
    return Pair(f"{a}+{b}=", n, surface(m, form, rng), form, equal, reference_text)


def reply(pair: Pair) -> str:
    """What the judge learns to write: the answer in digits, the reference in digits, then its
    verdict (its reasoning first, as the reports' generative judges do: each step is short and local)."""
    value = pair.reference if pair.equal else _value(pair.answer)
    return f"{value} vs {pair.reference} <verdict>{'yes' if pair.equal else 'no'}</verdict>"


def _value(answer: str) -> int:
    if answer.isdigit():
        return int(answer)
    if "+" in answer:
        return sum(int(part) for part in answer.split("+"))
    return next(n for n in range(200) if words(n) == answer)


def prompt(tokenizer, pair: Pair, fence_tag: str) -> str:
    template = load_templates_from_dict()["smoke_judge"]
    messages = template.messages(pair.question, pair.shown_reference, pair.answer, fence_tag)
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


@functools.lru_cache(maxsize=1)
def load_templates_from_dict():
    """The judge's template, checked by the product's loader."""
    return parse_templates(TEMPLATE, "tiny_judge.TEMPLATE")


def _pairs(
    count: int, rng: random.Random, exclude: set[tuple] = frozenset(), reference_forms: tuple[str, ...] = ("digits",)
) -> list[Pair]:
    out, seen = [], set(exclude)
    while len(out) < count:
        pair = make_pair(rng, reference_forms)
        key = (pair.shown_reference, pair.answer)
        if key not in seen:
            seen.add(key)
            out.append(pair)
    return out


def build(out_dir: Path, spec: JudgeSpec = JudgeSpec(), progress=print) -> dict:
    """Train the judge, measure it on held-apart pairs, save it with its template file; the summary."""
    from transformers import Qwen2ForCausalLM

    from reasonrl.smoke.model import model_config, supervised_batch
    from reasonrl.smoke.tokenizer import build_tokenizer

    rng = random.Random(spec.seed)
    tokenizer = build_tokenizer()
    tokenizer.padding_side = "right"
    held_apart = _pairs(spec.held_apart, rng, reference_forms=spec.reference_forms)
    excluded = {(p.shown_reference, p.answer) for p in held_apart}
    torch.manual_seed(spec.seed)
    model = Qwen2ForCausalLM(model_config(spec, tokenizer))  # the smoke model's architecture, this size
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / 100)
    )  # warm-up, then constant
    model.train()
    losses = []
    for step in range(1, spec.steps + 1):
        batch = []
        while len(batch) < spec.batch:
            pair = make_pair(rng, spec.reference_forms)
            if (pair.shown_reference, pair.answer) not in excluded:
                batch.append((prompt(tokenizer, pair, f"{rng.getrandbits(48):012x}"), reply(pair)))
        ids, mask, target = supervised_batch(batch, tokenizer)
        loss = model(input_ids=ids, attention_mask=mask, labels=target).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if step % 100 == 0 or step == spec.steps:
            progress(f"[tiny judge] step {step}/{spec.steps}  loss {sum(losses[-100:]) / len(losses[-100:]):.4f}")
    model.eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.padding_side = "left"
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    (out_dir / "judge_templates.yaml").write_text(yaml.safe_dump(TEMPLATE, sort_keys=False))
    summary = {
        "spec": asdict(spec),
        "digest": spec.digest(),
        "loss_first": losses[0],
        "loss_last": losses[-1],
        **measure(model, tokenizer, held_apart),
    }
    (out_dir / "tiny_judge.json").write_text(json.dumps(summary, indent=2))
    return summary


@torch.no_grad()
def verdicts(model, tokenizer, pairs: list[Pair], seed: int = 1) -> list[float | None]:
    """Greedy verdicts (1 / 0 / None) for ``pairs``, parsed as the product parses a judge's reply."""
    from reasonrl.plugins.model_rewards.verdict import parse_verdict

    template = load_templates_from_dict()["smoke_judge"]
    rng = random.Random(seed)
    out = []
    for start in range(0, len(pairs), 64):
        chunk = pairs[start : start + 64]
        texts = [prompt(tokenizer, p, f"{rng.getrandbits(48):012x}") for p in chunk]
        encoded = tokenizer(texts, return_tensors="pt", padding=True)
        generated = model.generate(**encoded, max_new_tokens=40, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        replies = tokenizer.batch_decode(generated[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
        out += [parse_verdict(reply, template) for reply in replies]
    return out


def measure(model, tokenizer, pairs: list[Pair]) -> dict:
    """Agreement with Math-Verify where it reads both sides (digits, expressions); accuracy on the
    pairs with words on either side (free-form: Math-Verify reads none of them)."""
    from math_verify import parse, verify

    judged = verdicts(model, tokenizer, pairs)
    readable, agree, word_pairs, word_right, unparsed = 0, 0, 0, 0, 0
    for pair, verdict in zip(pairs, judged):
        unparsed += verdict is None
        answer, reference = parse(pair.answer), parse(pair.shown_reference)
        if answer and reference:
            rule = float(verify(reference, answer))
            readable += 1
            agree += verdict == rule
        else:
            word_pairs += 1
            word_right += verdict == float(pair.equal)
    return {
        "held_apart_pairs": len(pairs),
        "mathverify_readable_pairs": readable,
        "agreement_with_mathverify": agree / max(readable, 1),
        "word_pairs": word_pairs,
        "accuracy_on_word_pairs": word_right / max(word_pairs, 1),
        "unparsed_replies": unparsed,
    }


#: the judge of the science-style rows: references in digits or words (a harder task: see the README)
SCIENCE_JUDGE = JudgeSpec(reference_forms=("digits", "words"))


def default_judge_dir(spec: JudgeSpec = JudgeSpec()) -> Path:
    from reasonrl.smoke.prepare import default_root

    return default_root().parent / f"tiny_judge-{spec.digest()}"


def ensure_tiny_judge(out: Path | None = None, progress=print, spec: JudgeSpec = JudgeSpec()) -> tuple[Path, dict]:
    """The judge folder (built unless it already holds this spec's judge) and its summary."""
    out = Path(out or default_judge_dir(spec))
    summary_file = out / "tiny_judge.json"
    if summary_file.exists() and json.loads(summary_file.read_text()).get("digest") == spec.digest():
        return out, json.loads(summary_file.read_text())
    return out, build(out, spec, progress)


def science_data(out: Path) -> Path:
    """``out/{train,val}.parquet``: the smoke nemotron rows made science-style by ``science_rows``."""
    import pandas as pd

    from reasonrl.smoke.prepare import prepare, write_recipe_data

    root = prepare()
    source = root / "data" / "nemotron"
    if not (source / "train.parquet").exists():
        write_recipe_data(root, "nemotron")
    out.mkdir(parents=True, exist_ok=True)
    for split in ("train", "val"):
        science_rows(pd.read_parquet(source / f"{split}.parquet")).to_parquet(out / f"{split}.parquet")
    return out


def science_rows(frame):
    """Every other row a ``science`` row whose reference is written in words: a free-form reference
    Math-Verify cannot read, so the judge decides (Llama-Nemotron §5.1 judges science answers so)."""
    frame = frame.copy()
    for index in range(0, len(frame), 2):
        frame.at[index, "data_source"] = SCIENCE
        truth = dict(frame.at[index, "reward_model"])
        frame.at[index, "reward_model"] = {**truth, "ground_truth": words(int(truth["ground_truth"]))}
    return frame


SCIENCE = "reasonrl/science"


if __name__ == "__main__":
    import sys

    if "--science-data" in sys.argv:
        print(f"science data: {science_data(Path(sys.argv[sys.argv.index('--science-data') + 1]))}")
