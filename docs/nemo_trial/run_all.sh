#!/bin/bash
# Commands that worked in this trial (run from /work/nemo-trial). Each experiment is a separate process.
set -e
cd /work/nemo-trial
# 1. environment (≈35 s torch + ≈2m10s NeMo with a warm pip cache on this machine; 2.9 GB)
#   python3 -m venv .venv-nemo && . .venv-nemo/bin/activate && pip install -U pip wheel setuptools
#   pip install -c constraints-nemo.txt torch==2.13.0
#   pip install -c constraints-nemo.txt "nemo-toolkit[llm,run]==2.7.3"
PY=/work/nemo-trial/.venv-nemo/bin/python
$PY -c "import nemo.collections.llm as llm; from nemo.collections.llm.gpt.model.llama_nemotron import HFLlamaNemotronImporter, LlamaNemotronModel; print('import ok')"
cd exp
# tiny HF nemotron-nas checkpoints (hidden 64, 4 heads, 4 layers, vocab 256; no-op / linear / GQA blocks)
$PY -c "import tiny_nas_hf as t, copy; t.make_checkpoint('hf_tiny'); b=copy.deepcopy(t.BLOCKS_OK); b[3]['attention']['n_heads_in_group']=4; t.make_checkpoint('hf_tiny_gqa', b); b=copy.deepcopy(t.BLOCKS_OK); b[0], b[1] = b[1], b[0]; t.make_checkpoint('hf_tiny_noop0', b)"
$PY exp_forward.py          # config from HF via importer, build, forward on CPU, stock convert_state
$PY exp_convert.py          # stock vs fixed convert_state, logits vs HF   (also: exp_convert.py $PWD/hf_tiny_gqa, $PWD/hf_tiny_noop0)
$PY exp_flags.py            # which fusion flags must be off on CPU
$PY exp_import_export.py    # llm.import_ckpt -> reload -> llm.export_ckpt round trip
$PY exp_te_pairing.py       # NeMo wildcard pairing with TE-style names (bookkeeping only)
$PY exp_distill.py --megatron-optim   # llm.distill on CPU: stops in megatron's schedule (device="cuda")
$PY exp_kd_direct.py        # ModelOpt logits KD driven by hand on CPU: works
