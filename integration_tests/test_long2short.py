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
    assert stats["mean_length_kept"] <= stats["mean_length_correct"]  # the shortest of each question's correct ones
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
