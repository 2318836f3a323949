"""``reasonrl bench mtp``: per-position acceptance and generation tokens/s with and without MTP
drafting in vLLM, in one run (MiMo §2.3). Default model: the toy MiMo (8 layers, hidden 128, one
MTP layer trained with the main model, replicated to 3), built once (~4 minutes on 2 cores) under
``$REASONRL_CACHE/mtp-toy-L8-H128``. Each engine runs in a fresh
process; requests run one at a time (latency-bound decoding, where drafting pays)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from reasonrl.contracts import CliCommand


def toy_checkpoint(root: Path, layers: int = 3, main_layers: int = 2, hidden: int = 64) -> Path:
    from reasonrl.plugins.mtp import toy
    from reasonrl.plugins.mtp.cli import replicate_checkpoint

    model = root / f"model{layers}"
    if not (model / "config.json").exists():
        if not (root / "model" / "config.json").exists():
            toy.build(root, main_layers=main_layers, hidden=hidden, log=lambda line: print(f"[toy] {line}", flush=True))
        replicate_checkpoint(
            root / "model",
            layers,
            root / "train.jsonl",
            root / "held_out.jsonl",
            model,
            prompt_length=toy.PROMPT_LENGTH,
            log=lambda line: print(f"[replicate] {line}", flush=True),
        )
    return model


def _spec_decode_metrics(llm) -> dict:
    return {
        metric.name: getattr(metric, "values", None) or getattr(metric, "value", None)
        for metric in llm.get_metrics()
        if "spec_decode" in metric.name
    }


def _delta(after, before):
    """Counters vLLM accumulates over an engine's life, for one run: after − before (lists per item)."""
    if isinstance(after, list):
        before = before or [0] * len(after)
        return [a - b for a, b in zip(after, before)]
    return None if after is None else after - (before or 0)


def generate(
    model: str, prompts: list[list[int]], k: int, max_tokens: int, concurrency: int, temperatures=(0.0,)
) -> list[dict]:
    """Generation in a vLLM CPU engine (this process), one run per temperature in one engine
    (each run's drafting counters are its own); k = 0: no drafting. With temperature > 0 a run
    also returns the mean target log-probability of the sampled tokens (a check that drafting
    keeps sampling on the target's distribution)."""
    import time

    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    options = dict(
        model=model,
        skip_tokenizer_init=True,
        dtype="float32",
        enforce_eager=True,
        kv_cache_memory_bytes=64 << 20,
        max_model_len=256,
        disable_log_stats=False,
        max_num_seqs=concurrency,
    )
    if k:
        import os

        from reasonrl.plugins.mtp.compat import MTP_DRAFTER_ENV

        os.environ[MTP_DRAFTER_ENV] = (
            "multi_layer=True"  # reasonrl's drafter in this engine (before vLLM loads plugins)
        )
        options["speculative_config"] = {"method": "mtp", "num_speculative_tokens": k}
    from reasonrl.compat.vllm import offline_engine_in_this_process

    offline_engine_in_this_process()  # run_engine's worker process only runs the engine
    llm = LLM(**options)
    warm_up = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    llm.generate([TokensPrompt(prompt_token_ids=prompts[0])], warm_up, use_tqdm=False)
    results = []
    for temperature in temperatures:
        params = SamplingParams(
            temperature=temperature, max_tokens=max_tokens, ignore_eos=True, logprobs=0 if temperature > 0 else None
        )
        before = _spec_decode_metrics(llm)
        start = time.perf_counter()
        outputs = llm.generate([TokensPrompt(prompt_token_ids=prompt) for prompt in prompts], params, use_tqdm=False)
        seconds = time.perf_counter() - start
        after = _spec_decode_metrics(llm)
        tokens = [list(output.outputs[0].token_ids) for output in outputs]
        logprobs = [
            next(iter(step.values())).logprob for output in outputs for step in (output.outputs[0].logprobs or [])
        ]
        results.append(
            {
                "k": k,
                "temperature": temperature,
                "tokens": tokens,
                "seconds": seconds,
                "mean_logprob": sum(logprobs) / len(logprobs) if logprobs else None,
                "tokens_per_s": sum(map(len, tokens)) / seconds,
                "drafts": _delta(after.get("vllm:spec_decode_num_drafts"), before.get("vllm:spec_decode_num_drafts")),
                "accepted_per_position": _delta(
                    after.get("vllm:spec_decode_num_accepted_tokens_per_pos"),
                    before.get("vllm:spec_decode_num_accepted_tokens_per_pos"),
                ),
            }
        )
    return results


def run_engine(
    model: Path, prompts_file: Path, k: int, max_tokens: int, concurrency: int, out: Path, temperatures=(0.0,)
) -> list[dict]:
    """``generate`` in a fresh process (vLLM's engine configuration is per process): one result
    per temperature."""
    command = [
        sys.executable,
        "-m",
        "benchmarks.mtp.bench",
        str(model),
        str(prompts_file),
        str(k),
        str(max_tokens),
        str(concurrency),
        str(out),
        ",".join(str(t) for t in temperatures),
    ]
    from benchmarks import child_env

    completed = subprocess.run(command, capture_output=True, text=True, env=child_env())
    if completed.returncode != 0:
        raise RuntimeError(f"vLLM run k={k} failed:\n{completed.stderr[-4000:]}")
    return json.loads(out.read_text())


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint", type=Path, default=None, help="MiMo-layout checkpoint (default: the toy, 3 MTP layers)"
    )
    parser.add_argument(
        "--prompts", type=Path, default=None, help="JSONL with input_ids (default: the toy's held-out rows)"
    )
    parser.add_argument(
        "--prompt-length", type=int, default=None, help="cut each prompt to this many tokens (default with the toy: 12)"
    )
    parser.add_argument(
        "--toy-main-layers",
        type=int,
        default=8,
        help="the toy's main-model depth (the drafter costs one layer per draft step)",
    )
    parser.add_argument("--toy-hidden", type=int, default=128)
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--k", type=int, default=3, help="draft tokens (<= the checkpoint's MTP layers)")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=32,
        help="greedy tokens per prompt (the toy trains on 48-token rows: 12 + 32 stays inside)",
    )
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument(
        "--out", type=Path, default=None, help="where to write mtp_bench.json (default: the checkpoint's parent)"
    )


def _run(args: argparse.Namespace) -> int:
    from reasonrl.plugins.mtp import toy
    from reasonrl.plugins.mtp.training import read_sequences

    root = (
        Path(os.environ.get("REASONRL_CACHE", Path.home() / ".cache" / "reasonrl"))
        / f"mtp-toy-L{args.toy_main_layers}-H{args.toy_hidden}"
    )
    model = args.checkpoint or toy_checkpoint(root, max(args.k, 1), args.toy_main_layers, args.toy_hidden)
    prompts_source = args.prompts or root / "held_out.jsonl"
    length = args.prompt_length or (toy.PROMPT_LENGTH if args.prompts is None else None)
    prompts = [row[:length] if length else row for row in read_sequences(prompts_source)][: args.count]
    out = args.out or Path(model).parent
    out.mkdir(parents=True, exist_ok=True)
    prompts_file = out / "bench_prompts.json"
    prompts_file.write_text(json.dumps(prompts))
    results = []
    for k in (0, 1, args.k) if args.k > 1 else (0, args.k):
        print(f"[bench mtp] vLLM CPU, k = {k} ...", flush=True)
        (result,) = run_engine(
            Path(model), prompts_file, k, args.max_tokens, args.concurrency, out / f"bench_k{k}.json"
        )
        results.append(result)
    base = results[0]
    print(
        f"{len(prompts)} prompts, {args.max_tokens} greedy tokens each, {args.concurrency} request(s) at a time, model {model}"
    )
    print(f"k = 0: {base['tokens_per_s']:.1f} tokens/s")
    summary = {"model": str(model), "prompts": len(prompts), "runs": []}
    for result in results[1:]:
        drafts, accepted = result["drafts"], result["accepted_per_position"] or []
        rates = [count / drafts for count in accepted] if drafts else []
        identical = sum(a == b for a, b in zip(result["tokens"], base["tokens"]))
        print(
            f"k = {result['k']}: {result['tokens_per_s']:.1f} tokens/s (speed ratio {result['tokens_per_s'] / base['tokens_per_s']:.2f}); "
            f"acceptance per position {', '.join(f'{rate:.3f}' for rate in rates)}; outputs identical to k = 0: {identical}/{len(prompts)}"
        )
        summary["runs"].append(
            {
                "k": result["k"],
                "tokens_per_s": result["tokens_per_s"],
                "speed_ratio": result["tokens_per_s"] / base["tokens_per_s"],
                "acceptance_per_position": rates,
                "identical_outputs": identical,
            }
        )
    summary["baseline_tokens_per_s"] = base["tokens_per_s"]
    (out / "mtp_bench.json").write_text(json.dumps(summary, indent=1))
    return 0


BENCHMARK = CliCommand(
    "mtp", "MTP drafting in vLLM CPU: per-position acceptance, tokens/s with and without (MiMo §2.3)", _configure, _run
)


if __name__ == "__main__":
    model_path, prompts_path, k, max_tokens, concurrency, out_path, temperatures = sys.argv[1:8]
    result = generate(
        model_path,
        json.loads(Path(prompts_path).read_text()),
        int(k),
        int(max_tokens),
        int(concurrency),
        [float(t) for t in temperatures.split(",")],
    )
    Path(out_path).write_text(json.dumps(result))
