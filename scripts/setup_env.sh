#!/usr/bin/env bash
# Create (or update) .venv with the CPU build of torch and reasonrl installed editable.
#   bash scripts/setup_env.sh              # runtime only
#   bash scripts/setup_env.sh dev,megatron # + test tools and megatron-core 0.16.1
# Idempotent; safe to re-run. Never lets pip choose a torch: constraints/cpu.txt pins it.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python="${PYTHON:-python3}"

[ -x .venv/bin/python ] || "$python" -m venv .venv
pip=(.venv/bin/python -m pip --disable-pip-version-check)
echo "[setup] pip, torch (CPU build) ..."
"${pip[@]}" install -q --upgrade pip
"${pip[@]}" install -q -c constraints/cpu.txt torch==2.13.0
echo "[setup] reasonrl${extras:+[$extras]} + verl[verl-core]==0.9.1 ..."
"${pip[@]}" install -q -c constraints/cpu.txt -e ".${extras:+[$extras]}"
# verl[verl-core] pulls torchcodec; its wheel fails to load beside the CPU torch and then
# breaks transformers' media imports. reasonrl needs none of these.
"${pip[@]}" uninstall -q -y torchcodec torchvision torchaudio >/dev/null 2>&1 || true
echo "[setup] done: $(.venv/bin/python -c 'import torch, verl; print(f"torch {torch.__version__}, verl {verl.__version__}")' 2>/dev/null)"
