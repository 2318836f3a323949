"""A discriminative reward model the CPU can run: the smoke policy's body with a score head
(``Qwen2ForSequenceClassification``, one label), trained with the Bradley-Terry loss

    L = -log σ(s(x, y_right) - s(x, y_wrong))

on pairs of answers to the smoke task (two-digit addition): the right sum against a near miss.
It stands in for a reward model like LongCat's general-RL one (§3.4.3) in CPU runs, where verl
serves it on its reward-model server and the ``model_rewards`` plugin asks its ``/classify``
endpoint. A demo asset on the smoke task (benchmarks/, beside the tiny judge). Built
deterministically from the smoke model into a folder named by its spec's hash; ``tiny_rm.json``
holds its pairwise accuracy on held-apart pairs (the share where the right answer scores higher).

    python -m benchmarks.model_rewards.tiny_rm                  # build (or find) it, print the accuracy
    python -m benchmarks.model_rewards.tiny_rm --data DIR       # + the general-stage data set in DIR

The general-stage data set: the smoke longcat rows, every other one relabelled ``general`` (no
rule: the reward model scores it, ``+reasonrl/model_rewards=longcat_rm``; its question is the
smoke rows' ``extra_info.question``); the others stay sums Math-Verify grades.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

import torch


@dataclass(frozen=True)
class RewardModelSpec:
    steps: int = 300
    batch: int = 64
    lr: float = 1e-3
    held_apart: int = 400  # evaluation pairs, never trained on
    seed: int = 0

    def digest(self, policy_digest: str) -> str:
        identity = {"spec": asdict(self), "policy": policy_digest, "layout": "tiny-rm-v1"}
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]


def answer_pair(rng: random.Random) -> tuple[str, str, str]:
    """(prompt, right answer, wrong answer): the wrong one a near miss (1-10 off)."""
    a, b = rng.randint(0, 99), rng.randint(0, 99)
    wrong = a + b + rng.choice([-1, 1]) * rng.randint(1, 10)
    return f"{a}+{b}=", str(a + b), str(max(wrong, 0) if wrong != a + b else a + b + 1)


def texts(tokenizer, prompt: str, answer: str) -> str:
    """The conversation as the plugin sends it: the reward model's chat template over (user, assistant)."""
    messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
    return tokenizer.apply_chat_template(messages, tokenize=False)


def scores(model, tokenizer, batch: list[str]) -> torch.Tensor:
    encoded = tokenizer(batch, return_tensors="pt", padding=True)
    return model(**encoded).logits.squeeze(-1)


def pairwise_accuracy(model, tokenizer, pairs: list[tuple[str, str, str]]) -> float:
    with torch.no_grad():
        right = scores(model, tokenizer, [texts(tokenizer, p, r) for p, r, _ in pairs])
        wrong = scores(model, tokenizer, [texts(tokenizer, p, w) for p, _, w in pairs])
    return float((right > wrong).float().mean())


def build(out: Path, policy: Path, spec: RewardModelSpec = RewardModelSpec(), progress=print) -> dict:
    from transformers import AutoTokenizer, Qwen2ForSequenceClassification

    torch.manual_seed(spec.seed)
    rng = random.Random(spec.seed)
    tokenizer = AutoTokenizer.from_pretrained(policy)
    tokenizer.padding_side = "right"
    model = Qwen2ForSequenceClassification.from_pretrained(policy, num_labels=1)
    model.config.pad_token_id = tokenizer.pad_token_id  # the head pools the last non-pad token
    held = [answer_pair(random.Random(10_000 + i)) for i in range(spec.held_apart)]
    held_prompts = {p for p, _, _ in held}
    before = pairwise_accuracy(model, tokenizer, held)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr)
    model.train()
    for step in range(1, spec.steps + 1):
        batch = []
        while len(batch) < spec.batch:
            pair = answer_pair(rng)
            if pair[0] not in held_prompts:
                batch.append(pair)
        right = scores(model, tokenizer, [texts(tokenizer, p, r) for p, r, _ in batch])
        wrong = scores(model, tokenizer, [texts(tokenizer, p, w) for p, _, w in batch])
        loss = -torch.nn.functional.logsigmoid(right - wrong).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0 or step == spec.steps:
            progress(f"[tiny rm] step {step}/{spec.steps}  loss {loss.item():.4f}")
    model.eval()
    summary = {
        "pairwise_accuracy_before": before,
        "pairwise_accuracy": pairwise_accuracy(model, tokenizer, held),
        "held_apart_pairs": len(held),
        "spec": asdict(spec),
    }
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return summary


def ensure_tiny_rm(progress=print) -> tuple[Path, dict]:
    """The tiny reward model beside the smoke assets (built on first use, ~1 minute here)."""
    from reasonrl.smoke.prepare import prepare

    root = prepare()
    policy_digest = (root / "STAMP").read_text().strip()
    spec = RewardModelSpec()
    out = root.parent / f"tiny_rm-{spec.digest(policy_digest)}"
    summary_file = out / "tiny_rm.json"
    if summary_file.exists():
        return out, json.loads(summary_file.read_text())
    summary = build(out, root / "model", spec, progress)
    summary_file.write_text(json.dumps(summary, indent=2))
    return out, summary


GENERAL = "general"


def general_stage_data(out: Path) -> Path:
    """``out/{train,val}.parquet``: the smoke longcat rows, every other one a ``general`` row."""
    import pandas as pd

    from reasonrl.smoke.prepare import prepare

    source = prepare() / "data" / "longcat"
    out.mkdir(parents=True, exist_ok=True)
    for split in ("train", "val"):
        frame = pd.read_parquet(source / f"{split}.parquet")
        general = frame.index % 2 == 0
        frame.loc[general, "data_source"] = GENERAL
        frame.loc[general, "ability"] = GENERAL
        frame.to_parquet(out / f"{split}.parquet")
    return out


if __name__ == "__main__":
    import sys

    if "--data" in sys.argv:
        print(f"general-stage data: {general_stage_data(Path(sys.argv[sys.argv.index('--data') + 1]))}")
    folder, summary = ensure_tiny_rm()
    print(
        f"tiny rm {folder}: pairwise accuracy {summary['pairwise_accuracy']:.3f} on {summary['held_apart_pairs']} "
        f"held-apart pairs (right sum vs a near miss; {summary['pairwise_accuracy_before']:.3f} with the fresh head)"
    )
