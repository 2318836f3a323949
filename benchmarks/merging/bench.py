"""``reasonrl bench merge``: the checkpoint merge's peak memory against the checkpoint size.

Writes a base and ``--experts`` expert checkpoints of ``--tensors`` random tensors of
``--tensor-mb`` MB each (two shards, float32 or bf16), runs the streaming fusion in a fresh
process and reads that process's peak resident memory (Linux ``VmHWM``, reset just before the merge).
Reported: the merge's own peak (after minus before) ÷ (one tensor × number of models) — tensors'
worth resident per model (target ≤ 2) — and ÷ one checkpoint's size; and the time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from reasonrl.contracts import CliCommand

CHILD = """
import json, sys, time
from pathlib import Path
import torch
from reasonrl.plugins.merging.checkpoints import merge_checkpoints
from reasonrl.plugins.merging.fusion import Fusion

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024

args = json.loads(sys.argv[1])
torch.zeros(1) + 1
with open("/proc/self/clear_refs", "w") as handle:  # reset the peak (VmHWM) to the current RSS
    handle.write("5")
before = status("VmRSS")
start = time.perf_counter()
merge_checkpoints(Path(args["base"]), [Path(p) for p in args["experts"]], Path(args["output"]),
                  Fusion(True, args["drop_rate"], True, 0, 1.0))
seconds = time.perf_counter() - start
print(json.dumps({"before": before, "after": status("VmHWM"), "seconds": seconds}))
"""


def write_checkpoint(folder: Path, tensors: int, numel: int, dtype, seed: int) -> None:
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"architectures": ["BenchModel"], "model_type": "bench"}))
    generator = torch.Generator().manual_seed(seed)
    half = tensors // 2 or 1
    weight_map = {}
    for shard, names in enumerate((range(0, half), range(half, tensors))):
        if not names:
            continue
        filename = f"model-{shard + 1:05d}-of-00002.safetensors"
        save_file(
            {f"layer.{i}.weight": torch.randn(numel, generator=generator).to(dtype) for i in names}, folder / filename
        )
        weight_map.update({f"layer.{i}.weight": filename for i in names})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


def measure(experts: int, tensors: int, tensor_mb: float, dtype_name: str, drop_rate: float) -> dict:
    import torch

    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype_name]
    element = torch.tensor([], dtype=dtype).element_size()
    numel = int(tensor_mb * 2**20 / element)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for index in range(experts + 1):
            write_checkpoint(root / f"m{index}", tensors, numel, dtype, seed=index)
        print(f"[bench merge] {experts + 1} checkpoints of {tensors} × {tensor_mb} MB written; merging ...", flush=True)
        child_args = {
            "base": str(root / "m0"),
            "experts": [str(root / f"m{i}") for i in range(1, experts + 1)],
            "output": str(root / "merged"),
            "drop_rate": drop_rate,
        }
        done = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(child_args)], capture_output=True, text=True, check=True
        )
        peak = json.loads(done.stdout.strip().splitlines()[-1])
    tensor_bytes = numel * element
    extra = max(0, peak["after"] - peak["before"])
    models = experts + 1
    return {
        "models": models,
        "tensor_mb": tensor_bytes / 2**20,
        "checkpoint_mb": tensors * tensor_bytes / 2**20,
        "merge_peak_mb": extra / 2**20,
        "tensors_resident_per_model": extra / (tensor_bytes * models),
        "peak_over_checkpoint": extra / (tensors * tensor_bytes),
        "seconds": peak["seconds"],
        "dtype": dtype_name,
        "drop_rate": drop_rate,
    }


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--experts", type=int, default=3)
    parser.add_argument("--tensors", type=int, default=16)
    parser.add_argument("--tensor-mb", type=float, default=16.0)
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="bfloat16")
    parser.add_argument("--drop-rate", type=float, default=0.3)
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here")


def _run(args: argparse.Namespace) -> int:
    result = measure(args.experts, args.tensors, args.tensor_mb, args.dtype, args.drop_rate)
    print(
        f"merge of {result['models']} checkpoints ({result['checkpoint_mb']:.0f} MB each, tensors of "
        f"{result['tensor_mb']:.1f} MB, {result['dtype']}, drop {result['drop_rate']}): peak "
        f"{result['merge_peak_mb']:.0f} MB above the process's start = {result['tensors_resident_per_model']:.2f} "
        f"tensors per model (target <= 2), {result['peak_over_checkpoint']:.2f} x one checkpoint; "
        f"{result['seconds']:.1f} s",
        flush=True,
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


BENCHMARK = CliCommand(
    "merge", "peak memory of a streamed checkpoint merge against the checkpoint size", _configure, _run
)
