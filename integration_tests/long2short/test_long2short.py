"""Kimi §2.4 shortest rejection sampling on the smoke model through vLLM's CPU build: n sampled
answers per question, scored by the rewards plugin's math reward; the SFT parquet holds each
question's shortest correct answer and loads in verl's SFT dataset; the DPO pairs are Kimi's."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from reasonrl.plugins.long2short.selection import Sample, dpo_negatives, shortest_correct
from reasonrl.smoke.prepare import prepare, write_recipe_data
from reasonrl.testing.fresh_process import reasonrl_fresh

pytestmark = pytest.mark.integration


def test_shortest_rejection_sampling_and_dpo_pairs_on_vllm_cpu(tmp_path):
    root = prepare()
    data = write_recipe_data(root, "kimi_k15") / "train.parquet"
    out = {name: tmp_path / name for name in ("sft.parquet", "dpo.parquet", "samples.jsonl")}
    done = reasonrl_fresh(
        [
            "long2short",
            "sample",
            "--model",
            str(root / "model"),
            "--data",
            str(data),
            "--n",
            "4",
            "--max-tokens",
            "12",
            "--limit",
            "24",
            "--sft-out",
            str(out["sft.parquet"]),
            "--dpo-out",
            str(out["dpo.parquet"]),
            "--samples-out",
            str(out["samples.jsonl"]),
        ]
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("long2short stats: ")]
    stats = json.loads(line.removeprefix("long2short stats: "))
    groups = [
        [Sample(**s) for s in json.loads(line)["samples"]] for line in out["samples.jsonl"].read_text().splitlines()
    ]
    assert len(groups) == 24 and all(len(g) == 4 for g in groups)
    assert 0 < stats["questions_with_a_correct_sample"] <= 24, stats  # the warm-started model gets some sums right
    sft = pd.read_parquet(out["sft.parquet"])
    kept = [g[i].text for g in groups if (i := shortest_correct(g)) is not None]
    assert [m[-1]["content"] for m in sft["messages"]] == kept
    # the shortest of each question's correct ones: no longer than that question's mean correct length,
    # so their mean is at most the question-weighted mean (not the pooled mean_length_correct, which
    # questions with many short correct answers pull down; CI once saw 3.5625 > 3.5556 that way)
    per_question = [[s.length for s in g if s.correct] for g in groups if any(s.correct for s in g)]
    assert stats["mean_length_kept"] == pytest.approx(sum(min(q) for q in per_question) / len(per_question))
    assert stats["mean_length_kept"] <= sum(sum(q) / len(q) for q in per_question) / len(per_question) + 1e-9
    dpo = pd.read_parquet(out["dpo.parquet"]) if stats["dpo_pairs"] else pd.DataFrame(columns=["chosen", "rejected"])
    pairs = [(g[p].text, g[n].text) for g in groups for p, negs in [dpo_negatives(g)] for n in negs]
    assert [(c[0]["content"], r[0]["content"]) for c, r in zip(dpo["chosen"], dpo["rejected"])] == pairs
    refused = reasonrl_fresh(
        ["long2short", "sample", "--model", "m", "--data", "d", "--n", "1", "--sft-out", "a", "--dpo-out", "b"]
    )
    assert refused.returncode == 2 and "--n: 1" in refused.stderr

    # verl's SFT trainer reads the parquet (its multi-turn dataset, the smoke tokenizer's chat template)
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    tokenizer = AutoTokenizer.from_pretrained(root / "model")
    dataset = MultiTurnSFTDataset(
        [str(out["sft.parquet"])], tokenizer, OmegaConf.create({"max_length": 64, "truncation": "error"})
    )
    assert len(dataset) == len(kept) and int(dataset[0]["loss_mask"].sum()) > 0


def dpo_pairs_file(tmp_path):
    rows = [
        {
            "prompt": [{"role": "user", "content": f"{a}+{b}="}],
            "chosen": [{"role": "assistant", "content": str(a + b)}],
            "rejected": [{"role": "assistant", "content": f"{a + b + 1}{a}"}],
        }
        for a, b in [(12, 30), (5, 7), (40, 41), (9, 9), (61, 2), (33, 33), (18, 27), (70, 19)]
    ]
    path = tmp_path / "pairs.parquet"
    pd.DataFrame(rows).to_parquet(path)
    return path


def test_trls_dpo_loss_is_dpos_equation_with_the_frozen_start_as_reference(tmp_path):
    """TRL's loss on one batch against −mean log σ(β[(log π(y_w) − log π_ref(y_w)) − (log π(y_l) −
    log π_ref(y_l))]) computed here from the two models' logits (response tokens summed)."""
    import torch
    from transformers import AutoModelForCausalLM

    from reasonrl.plugins.long2short.dpo import trainer

    model = prepare() / "model"
    reference = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    with torch.no_grad():  # a reference that differs from the policy: the equation's both terms matter
        for p in reference.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(1)) * 0.05)
    dpo = trainer(
        model, dpo_pairs_file(tmp_path), tmp_path / "out", beta=0.3, batch_size=4, steps=1, ref_model=reference
    )
    batch = next(iter(dpo.get_train_dataloader()))
    policy = dpo.model
    policy.eval()
    with torch.no_grad():
        loss = dpo.compute_loss(policy, batch).item()

        def sequence_logps(net):
            logits = net(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1].float()
            picked = torch.log_softmax(logits, -1).gather(-1, batch["input_ids"][:, 1:, None])[..., 0]
            return (picked * batch["completion_mask"][:, 1:]).sum(-1)

        pi, ref = sequence_logps(policy), sequence_logps(reference)
    (pi_w, pi_l), (ref_w, ref_l) = pi.chunk(2), ref.chunk(2)  # TRL's batch: chosen rows, then rejected rows
    expected = -torch.nn.functional.logsigmoid(0.3 * ((pi_w - ref_w) - (pi_l - ref_l))).mean().item()
    assert abs(expected - 0.6931) > 1e-3, "a non-trivial case (not the ref = policy start)"
    assert loss == pytest.approx(expected, abs=1e-5)


def test_dpo_on_long2short_pairs_prefers_the_short_correct_answers(tmp_path):
    """A few DPO steps on CPU: the chosen−rejected reward margin grows from 0, the loss falls
    below log 2, and the trained checkpoint loads and generates."""
    done = reasonrl_fresh(
        [
            "long2short",
            "dpo",
            "--model",
            str(prepare() / "model"),
            "--pairs",
            str(dpo_pairs_file(tmp_path)),
            "--out",
            str(tmp_path / "dpo"),
            "--steps",
            "6",
            "--batch-size",
            "4",
            "--lr",
            "1e-4",
        ]
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("long2short dpo: ")]
    log = json.loads(line.removeprefix("long2short dpo: "))
    assert log["steps"] == 6 and log["first"]["loss"] == pytest.approx(0.6931, abs=1e-3)
    assert log["last"]["rewards/margins"] > 0 and log["last"]["loss"] < 0.6931
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(tmp_path / "dpo").generate(
        __import__("torch").tensor([[1, 2, 3]]), max_new_tokens=2, do_sample=False
    ).shape == (1, 5)
