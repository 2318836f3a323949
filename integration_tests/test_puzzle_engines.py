"""An exported Puzzle child (nemotron-nas checkpoint) run by the three engines on the same
tokens: Hugging Face transformers (the class the plugin registers), megatron-core's own
heterogeneous layer specs (0.16.1, CPU), and vLLM's native ``nemotron_nas`` (CPU build).
Each runs in a fresh process, as a user's would."""

from __future__ import annotations

import json
import sys

import pytest

from reasonrl.testing.fresh_process import python_fresh, run_fresh

pytestmark = pytest.mark.integration

MAKE_CHILD = """
import sys, torch
from transformers import LlamaConfig
from reasonrl.plugins.puzzle.library import AttentionVariant as A, FfnVariant as F, block_config
from reasonrl.plugins.puzzle.model import DeciLMForCausalLM
from reasonrl.plugins.puzzle.subblocks import nas_config
torch.manual_seed(0)
base = LlamaConfig(vocab_size=40, hidden_size=128, num_attention_heads=4, num_key_value_heads=4, intermediate_size=512,
                   num_hidden_layers={layers}, max_position_embeddings=64)
pairs = {pairs}
child = DeciLMForCausalLM(nas_config(base, [block_config(a, f, 4, 128) for a, f in pairs])).eval()
with torch.no_grad():
    for name, p in child.named_parameters():
        p.copy_(torch.randn_like(p) * 0.05 + (1.0 if "norm" in name else 0.0))
child.save_pretrained(sys.argv[1] if len(sys.argv) > 1 else {out!r})
tokens = torch.randint(0, 40, (2, 20))
torch.save({{"tokens": tokens, "logits": child(input_ids=tokens).logits.detach()}}, {out!r} + "/reference.pt")
"""

EVERY_KIND = ('[(A("attention", 4), F("ffn", 512)), (A("attention", 2), F("ffn", 256)), (A("attention", 1), F("linear")), '
              '(A("linear"), F("ffn", 768)), (A("no_op"), F("no_op")), (A("no_op"), F("ffn", 256))]')
VLLM_KINDS = '[(A("attention", 4), F("ffn", 512)), (A("attention", 2), F("ffn", 256)), (A("no_op"), F("ffn", 768)), (A("attention", 1), F("no_op"))]'

MEGATRON = """
import os, torch
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29561")
torch.distributed.init_process_group("gloo", rank=0, world_size=1)
from megatron.core import parallel_state
parallel_state.initialize_model_parallel()
from reasonrl.plugins.puzzle.megatron_adapter import load_child, logits
reference = torch.load({out!r} + "/reference.pt")
model = load_child({out!r})
print("MAXDIFF", (logits(model, reference["tokens"]) - reference["logits"]).abs().max().item())
"""

VLLM = """
import torch
def main():
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    reference = torch.load({out!r} + "/reference.pt")
    llm = LLM(model={out!r}, skip_tokenizer_init=True, dtype="float32", enforce_eager=True, kv_cache_memory_bytes=64 * 1024 * 1024, max_model_len=64, seed=0)
    tokens = reference["tokens"]
    outs = llm.generate([TokensPrompt(prompt_token_ids=row.tolist()) for row in tokens], SamplingParams(max_tokens=1, prompt_logprobs=0, detokenize=False))
    log_probs = torch.log_softmax(reference["logits"].float(), -1)
    worst = 0.0
    for b, out in enumerate(outs):
        for t in range(1, tokens.shape[1]):
            worst = max(worst, abs(out.prompt_logprobs[t][int(tokens[b, t])].logprob - log_probs[b, t - 1, tokens[b, t]].item()))
    print("MAXDIFF", worst)
if __name__ == "__main__":
    main()
"""


def _child(tmp_path, pairs: str, layers: int) -> str:
    out = str(tmp_path / "child")
    made = python_fresh(MAKE_CHILD.format(layers=layers, pairs=pairs, out=out))
    assert made.returncode == 0, made.stderr[-3000:]
    return out


def _maxdiff(result) -> float:
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return float(next(line.split()[1] for line in result.stdout.splitlines() if line.startswith("MAXDIFF")))


def test_megatron_core_heterogeneous_specs_match_transformers(tmp_path):
    out = _child(tmp_path, EVERY_KIND, 6)
    blocks = json.loads((tmp_path / "child" / "config.json").read_text())["block_configs"]
    assert {b["attention"]["no_op"] for b in blocks} == {True, False} and any(b["ffn"]["replace_with_linear"] for b in blocks)
    assert _maxdiff(python_fresh(MEGATRON.format(out=out))) < 1e-4


def test_vllm_nemotron_nas_matches_transformers(tmp_path):
    out = _child(tmp_path, VLLM_KINDS, 4)
    script = tmp_path / "run_vllm.py"
    script.write_text(VLLM.format(out=out))
    assert _maxdiff(run_fresh([sys.executable, str(script)], timeout=600)) < 1e-4


def test_vllm_limits_are_reported_for_linear_replacements():
    from reasonrl.plugins.puzzle.block_config import parse_block_configs
    from reasonrl.plugins.puzzle.model import vllm_unsupported

    blocks = parse_block_configs([{"attention": {"replace_with_linear": True}, "ffn": {"ffn_mult": 6.0}}], 4, 128)
    assert vllm_unsupported(blocks) == ["block_configs[0].attention: replace_with_linear is not implemented by vLLM's nemotron_nas"]
