"""Puzzle children in NeMo 2.7.3 (issue 25), in ``.venv-nemo`` (``scripts/setup_env.sh nemo``; the
README's test command builds it): a child with every block kind — no-op attention in block 0
(which NeMo's stock importer cannot read), per-layer GQA, linear attention, linear and pruned
FFNs, an empty layer — imported through NeMo's ``llm.import_ckpt`` and NeMo's importer class,
run by NeMo on CPU against transformers' log-probabilities, exported back through
``llm.export_ckpt``; and a checkpoint that is not a Puzzle export refused by the adapter itself,
naming the file and writing nothing. One NeMo process (NeMo's import alone takes ~18 s here).
The CLI path and the distillation in NeMo: test_puzzle_pipeline.py."""

from __future__ import annotations

import json

import pytest

from reasonrl.plugins.puzzle.nemo_side import adapter_results, run_adapter, same_tensors
from reasonrl.testing.fresh_process import python_fresh

pytestmark = pytest.mark.integration

MAKE_CHILD = """
import torch
from pathlib import Path
from transformers import LlamaConfig
from reasonrl.plugins.puzzle.engines import write_probe
from reasonrl.plugins.puzzle.library import AttentionVariant as A, FfnVariant as F, block_config
from reasonrl.plugins.puzzle.model import DeciLMForCausalLM
from reasonrl.plugins.puzzle.subblocks import nas_config
torch.manual_seed(0)
base = LlamaConfig(vocab_size=40, hidden_size=128, num_attention_heads=4, num_key_value_heads=4, intermediate_size=512,
                   num_hidden_layers=6, max_position_embeddings=64)
pairs = [(A("no_op"), F("ffn", 256)), (A("attention", 2), F("ffn", 256)), (A("attention", 1), F("linear")),
         (A("linear"), F("ffn", 768)), (A("no_op"), F("no_op")), (A("attention", 4), F("ffn", 512))]
child = DeciLMForCausalLM(nas_config(base, [block_config(a, f, 4, 128) for a, f in pairs])).eval()
with torch.no_grad():
    for name, p in child.named_parameters():
        p.copy_(torch.randn_like(p) * 0.05 + (1.0 if "norm" in name else 0.0))
child.save_pretrained({out!r})
write_probe(Path({out!r}), torch.randint(0, 40, (2, 20)))
base.save_pretrained({llama!r})  # a plain Llama config: not a Puzzle export
"""


def test_every_block_kind_runs_in_nemo_like_transformers_and_round_trips(tmp_path):
    child, llama = tmp_path / "child", tmp_path / "llama"
    made = python_fresh(MAKE_CHILD.format(out=str(child), llama=str(llama)))
    assert made.returncode == 0, made.stderr[-3000:]
    (llama / "model.safetensors").write_bytes((child / "model.safetensors").read_bytes())
    nemo, back, refused = tmp_path / "child_nemo", tmp_path / "child_back", tmp_path / "llama_nemo"
    done = run_adapter(
        ["import", child, nemo, "then", "logprobs", nemo, child / "engine_probe.pt", "then", "export", nemo, back]
        + ["then", "import", llama, refused],
        check=False,
    )
    results = {r["command"]: r for r in adapter_results(done)}
    print(results)
    assert results["logprobs"]["max_abs_logprob_diff"] <= 1e-4
    assert (nemo / "context" / "model.yaml").exists() and any((nemo / "weights").iterdir())
    assert same_tensors(child, back) == (True, 0.0)
    assert json.loads((child / "config.json").read_text()) == json.loads((back / "config.json").read_text())
    # the last command: the adapter's own check, before NeMo writes anything
    assert done.returncode == 2, done.stderr[-3000:]
    assert f"{llama / 'config.json'}: not a DeciLM / nemotron-nas export (model_type 'llama'" in done.stderr
    assert not refused.exists() and not list(tmp_path.glob(".llama_nemo*"))
