"""The reasonrl side of the NeMo adapter (issue 25): runs in ``.venv`` and never imports NeMo.

NeMo 2.7.3's LLM collection cannot share ``.venv`` with verl + vLLM (docs/nemo.md), so it lives
in ``.venv-nemo`` (``bash scripts/setup_env.sh nemo``) and this module drives it there:
``python -m reasonrl.plugins.puzzle.nemo_adapter <command>`` in that interpreter. It also checks a
checkpoint before anything runs (a clear error naming the file, nothing written) and reports the
side environment's state for ``reasonrl plugins`` without starting it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

#: NeMo's side environment: $REASONRL_NEMO_VENV, else ``.venv-nemo`` beside the running venv, else in the cwd
NEMO_VENV_ENV = "REASONRL_NEMO_VENV"
NEMO_VENV_NAME = ".venv-nemo"
ADAPTER_MODULE = "reasonrl.plugins.puzzle.nemo_adapter"
#: the versions the adapter was written and tested against (constraints/nemo.txt)
TESTED = {"nemo-toolkit": "2.7.3", "megatron-core": "0.15.3"}


class NemoAdapterError(ValueError):
    """A checkpoint or environment the NeMo adapter cannot take; the message names the file."""


def read_export(checkpoint_dir: str | Path) -> dict:
    """The ``config.json`` of a Puzzle export (``nemotron-nas`` / ``DeciLMForCausalLM``, per-layer
    ``block_configs``), checked; raises :class:`NemoAdapterError` naming the offending file."""
    checkpoint_dir = Path(checkpoint_dir)
    config_file = checkpoint_dir / "config.json"
    if not config_file.is_file():
        raise NemoAdapterError(
            f"{config_file}: missing; expected a Puzzle export (reasonrl puzzle export writes child/)"
        )
    try:
        config = json.loads(config_file.read_text())
    except (OSError, ValueError) as error:
        raise NemoAdapterError(f"{config_file}: not readable JSON ({error})") from None
    if not isinstance(config, dict):
        raise NemoAdapterError(f"{config_file}: expected a JSON object")
    kind = config.get("model_type")
    architectures = config.get("architectures") or []
    if kind != "nemotron-nas" or "DeciLMForCausalLM" not in architectures:
        raise NemoAdapterError(
            f"{config_file}: not a DeciLM / nemotron-nas export (model_type {kind!r}, architectures {architectures}); "
            "the NeMo adapter takes Puzzle children (model_type 'nemotron-nas', DeciLMForCausalLM, block_configs)"
        )
    blocks = config.get("block_configs")
    layers = config.get("num_hidden_layers")
    if not isinstance(blocks, list) or len(blocks) != layers:
        raise NemoAdapterError(
            f"{config_file}: block_configs must list one block per layer (num_hidden_layers = {layers})"
        )
    for index, block in enumerate(blocks):
        for part in ("attention", "ffn"):
            if not isinstance(block, dict) or not isinstance(block.get(part), dict):
                raise NemoAdapterError(f"{config_file}: block_configs[{index}] has no {part!r} mapping")
    if config.get("tie_word_embeddings"):
        raise NemoAdapterError(f"{config_file}: tie_word_embeddings is true; Puzzle exports (and Nemotron) are untied")
    rope_type = rope_settings(config)["rope_type"]
    if rope_type not in ("default", "llama3"):
        raise NemoAdapterError(
            f"{config_file}: rope type {rope_type!r}; NeMo's Llama-Nemotron configs apply plain or llama3 RoPE only"
        )
    if not sorted(checkpoint_dir.glob("*.safetensors")):
        raise NemoAdapterError(f"{checkpoint_dir}: no *.safetensors weights beside config.json")
    return config


def rope_settings(config: dict) -> dict:
    """RoPE of a config.json written by transformers 4.x (``rope_theta``, ``rope_scaling``) or 5.x
    (``rope_parameters``): theta, type and the llama3 scaling values (factor 1.0: no scaling)."""
    params = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    rope_type = params.get("rope_type") or params.get("type") or "default"
    return {
        "rope_theta": float(params.get("rope_theta", config.get("rope_theta", 10000.0))),
        "rope_type": rope_type,
        "factor": float(params.get("factor", 1.0)) if rope_type == "llama3" else 1.0,
        "low_freq_factor": float(params.get("low_freq_factor", 1.0)),
        "high_freq_factor": float(params.get("high_freq_factor", 4.0)),
        "original_max_position_embeddings": int(params.get("original_max_position_embeddings", 8192)),
    }


def nemo_venv() -> Path:
    """Where ``.venv-nemo`` is (it may not exist)."""
    if os.environ.get(NEMO_VENV_ENV):
        return Path(os.environ[NEMO_VENV_ENV])
    beside = Path(sys.prefix).parent / NEMO_VENV_NAME
    return beside if beside.exists() else Path.cwd() / NEMO_VENV_NAME


def _installed_version(venv: Path, distribution: str) -> str | None:
    """A distribution's version read from its metadata folder (no interpreter started)."""
    normalized = distribution.replace("-", "_").lower()
    for info in venv.glob("lib/python3*/site-packages/*.dist-info"):
        name, _, version = info.name[: -len(".dist-info")].rpartition("-")
        if name.replace("-", "_").lower() == normalized:
            return version
    return None


def nemo_status() -> dict:
    """``.venv-nemo``'s state for ``reasonrl plugins``, from files only (fast, starts nothing)."""
    venv = nemo_venv()
    if not (venv / "bin" / "python").exists():
        return {"venv": str(venv), "state": "absent", "hint": "bash scripts/setup_env.sh nemo"}
    versions = {name: _installed_version(venv, name) for name in (*TESTED, "transformers", "reasonrl")}
    missing = [name for name, version in versions.items() if version is None]
    untested = [f"{name} {versions[name]} (tested: {want})" for name, want in TESTED.items() if versions[name] != want]
    state = "incomplete" if missing else "untested versions" if untested else "ready"
    return {"venv": str(venv), "state": state, "versions": versions, "missing": missing, "untested": untested}


def run_adapter(args: list[str], timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess:
    """``python -m reasonrl.plugins.puzzle.nemo_adapter *args`` in ``.venv-nemo``; its stdout has
    one JSON result line per command (:func:`adapter_results`)."""
    python = nemo_venv() / "bin" / "python"
    if not python.exists():
        raise NemoAdapterError(f"{python}: NeMo's side environment is missing; run: bash scripts/setup_env.sh nemo")
    done = subprocess.run(
        [str(python), "-m", ADAPTER_MODULE, *map(str, args)], capture_output=True, text=True, timeout=timeout
    )
    if check and done.returncode != 0:
        raise NemoAdapterError(
            f"NeMo adapter {' '.join(map(str, args[:1]))} failed (exit {done.returncode}):\n{done.stderr[-4000:]}"
        )
    return done


def adapter_results(done: subprocess.CompletedProcess) -> list[dict]:
    """The JSON objects the adapter's commands printed (one line each, in order)."""
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if not results:
        raise NemoAdapterError(f"the NeMo adapter printed no result:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return results


def same_tensors(first_dir: str | Path, second_dir: str | Path) -> tuple[bool, float]:
    """Whether two safetensors checkpoints hold the same names and bit-identical tensors (and
    the largest absolute difference where names and shapes agree)."""
    from reasonrl.plugins.puzzle.megatron_adapter import load_weights  # torch: imported where used

    first, second = load_weights(first_dir), load_weights(second_dir)
    if set(first) != set(second) or any(first[k].shape != second[k].shape for k in first):
        return False, float("inf")
    largest = max(((first[k].float() - second[k].float()).abs().max().item() for k in first), default=0.0)
    return all(first[k].dtype == second[k].dtype and bool((first[k] == second[k]).all()) for k in first), largest


def nemo_round_trip(
    child_dir: Path, nemo_dir: Path, probe_file: Path, back_dir: Path, distill: tuple | None = None
) -> dict:
    """In one ``.venv-nemo`` process: the child imported into NeMo (``llm.import_ckpt``), NeMo's
    log-probabilities on the probe's tokens, the NeMo checkpoint exported back (``llm.export_ckpt``)
    and compared here tensor for tensor; with ``distill = (teacher export, teacher NeMo dir,
    tokens.pt, output dir, steps, lr)`` also the teacher imported and the child distilled from it."""
    read_export(child_dir)  # bad input: named, nothing written
    commands = [
        "import",
        child_dir,
        nemo_dir,
        "then",
        "logprobs",
        nemo_dir,
        probe_file,
        "then",
        "export",
        nemo_dir,
        back_dir,
    ]
    if distill:
        teacher_dir, teacher_nemo, tokens, out_dir, steps, lr = distill
        read_export(teacher_dir)
        commands += ["then", "import", teacher_dir, teacher_nemo]
        commands += ["then", "distill", teacher_nemo, nemo_dir, tokens, out_dir, f"--steps={steps}", f"--lr={lr}"]
    results = [{k: v for k, v in r.items() if k != "command"} for r in adapter_results(run_adapter(commands))]
    identical, largest = same_tensors(child_dir, back_dir)
    out = {**results[0], **results[1], "round_trip_identical": identical, "round_trip_max_abs_diff": largest}
    out["round_trip_config_equal"] = json.loads((child_dir / "config.json").read_text()) == json.loads(
        (back_dir / "config.json").read_text()
    )
    if distill:
        out["distill"] = results[-1]
    return out
