#!/usr/bin/env bash
# The prepared GPU check (issue 44), for the first GPU machine available: one GPU, verl's GPU stack.
#   bash scripts/gpu_check.sh [OUT]        # OUT: where logs, runs and gpu_check.md go (default gpu_check/<time>)
# Builds .venv-gpu first if missing (scripts/setup_gpu_env.sh: verl[vllm]==0.9.1's pins, several GB),
# or uses REASONRL_GPU_PYTHON (an environment where verl 0.9.1, vLLM and reasonrl are installed).
# Then: each recipe for two steps on the smoke model on the GPU, and the GPU-stack suite; prints a
# table (scripts/gpu_check.py says what each column is). Exit 1 if any run or the suite failed.
# REASONRL_GPU_CHECK_PLATFORM=cpu runs the same commands on the CPU preset (to check the script).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-gpu_check/$(date +%Y%m%d-%H%M%S)}"
python="${REASONRL_GPU_PYTHON:-}"
if [ -z "$python" ]; then
  [ -x .venv-gpu/bin/python ] || bash scripts/setup_gpu_env.sh
  python=.venv-gpu/bin/python
fi
"$python" -c "import verl, vllm, reasonrl" || { echo "[gpu-check] $python lacks verl, vllm or reasonrl" >&2; exit 1; }
export PYTHONUNBUFFERED=1
exec "$python" scripts/gpu_check.py --python "$python" --out "$out" --platform "${REASONRL_GPU_CHECK_PLATFORM:-gpu}"
