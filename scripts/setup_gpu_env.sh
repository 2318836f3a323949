#!/usr/bin/env bash
# Create (or update) .venv-gpu: verl's GPU stack exactly as verl 0.9.1 pins it — verl[vllm]==0.9.1
# (vLLM 0.24.0, torch 2.11.0 with CUDA, transformers 5.9.0) — plus reasonrl (editable) and its
# test tools. CUDA wheels install without a GPU, so the GPU-stack compatibility suite
# (integration_tests/gpu_stack) runs on a CPU-only host too:
#   bash scripts/setup_gpu_env.sh && .venv-gpu/bin/python -m pytest integration_tests/gpu_stack
# Downloads several GB (CUDA torch, NVIDIA libraries, vLLM): never part of the CPU set-up or CI.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
[ -x .venv-gpu/bin/python ] || "$python" -m venv .venv-gpu
pip=(.venv-gpu/bin/python -m pip --disable-pip-version-check)
echo "[setup-gpu] pip, verl[vllm]==0.9.1 with its pins (several GB) ..."
"${pip[@]}" install -q --upgrade pip
"${pip[@]}" install -q -c constraints/gpu.txt "verl[vllm]==0.9.1"
echo "[setup-gpu] reasonrl[dev,megatron] (editable), verl's pins held by constraints/gpu.txt ..."
"${pip[@]}" install -q -c constraints/gpu.txt -e ".[dev,megatron]"
echo "[setup-gpu] done: $(.venv-gpu/bin/python -c "import importlib.metadata as m; print(', '.join(f'{p} {m.version(p)}' for p in ('torch', 'transformers', 'vllm', 'verl', 'reasonrl')))" 2>/dev/null)"
