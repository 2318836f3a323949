"""puzzle: Puzzle NAS for Llama parents (Llama-Nemotron §2).

Block library (``library.py``), blockwise local distillation (``distill.py``), per-subblock
quality and resource costs (``stages/score.py``, ``costs.py``), the MIP search (``search.py``;
``reasonrl.api.solve_architecture``), FFN Fusion (``fusion.py``) and export as a Llama-Nemotron
(``nemotron-nas``) checkpoint whose model class (``model.py``) this plugin registers with
transformers — in verl's processes through the verl bridge, in vLLM's through its plugin
loader. ``reasonrl puzzle <stage>|run`` drives it (``cli.py``).
"""

from __future__ import annotations

from reasonrl.contracts import CliCommand, PluginInfo, Registration
from reasonrl.hookspecs import hookimpl

#: transformers' classes by name: imported when transformers first looks a config / model up
CONFIG_CLASS = "reasonrl.plugins.puzzle.hf_config:NemotronNasConfig"
MODEL_CLASS = "reasonrl.plugins.puzzle.model:DeciLMForCausalLM"


def _register_model() -> None:
    from reasonrl.compat.transformers import register_causal_lm_when_loaded

    register_causal_lm_when_loaded("puzzle", "nemotron-nas", CONFIG_CLASS, MODEL_CLASS)


def _register_config() -> None:
    from reasonrl.compat.transformers import register_causal_lm_when_loaded

    register_causal_lm_when_loaded("puzzle", "nemotron-nas", CONFIG_CLASS)


@hookimpl
def reasonrl_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="puzzle",
        summary="Puzzle NAS: block library, local distillation, MIP search, FFN Fusion, nemotron-nas export",
        reports=("Llama-Nemotron §2",),
    )


@hookimpl
def reasonrl_verl_registrations() -> list[Registration]:
    # verl's FSDP engine loads models through transformers' Auto classes
    return [
        Registration(
            "verl",
            "transformers_model",
            "nemotron-nas",
            _register_model,
            "AutoModelForCausalLM['nemotron-nas'] = DeciLMForCausalLM",
        )
    ]


@hookimpl
def reasonrl_vllm_registrations() -> list[Registration]:
    # vLLM has the model (nemotron_nas.py) but reads the config through transformers' AutoConfig
    return [
        Registration(
            "vllm",
            "transformers_config",
            "nemotron-nas",
            _register_config,
            "AutoConfig['nemotron-nas'] = NemotronNasConfig",
        )
    ]


@hookimpl
def reasonrl_cli_commands() -> list[CliCommand]:
    from reasonrl.plugins.puzzle.cli import PUZZLE_COMMAND

    return [PUZZLE_COMMAND]


@hookimpl
def reasonrl_benchmarks() -> list[CliCommand]:
    # benchmarks/puzzle/ of a source checkout; the installed package holds no benchmarks
    from reasonrl.source_checkout import checkout_benchmarks

    return checkout_benchmarks("puzzle")


@hookimpl
def reasonrl_api_functions():
    from reasonrl.plugins.puzzle.facades import solve_architecture

    return {"solve_architecture": solve_architecture}


def _child_layer_spec(hf_config: dict, use_te: bool = False):
    from reasonrl.plugins.puzzle.megatron_adapter import child_layer_spec

    return child_layer_spec(hf_config, use_te=use_te)


@hookimpl
def reasonrl_megatron_layer_specs():
    # a Puzzle child's heterogeneous blocks as megatron-core layer specs (the NeMo/Megatron route)
    return {"puzzle_child": _child_layer_spec}


@hookimpl
def reasonrl_side_environments():
    # .venv-nemo: NeMo 2.7.3's LLM side for Puzzle children (docs/nemo.md); read from files only
    from reasonrl.plugins.puzzle.nemo_side import nemo_status

    return {"nemo": nemo_status}


@hookimpl
def reasonrl_reaches() -> list:
    # the upstream internals only this plugin uses, declared beside their accessors
    from reasonrl.plugins.puzzle.compat import REACHES

    return list(REACHES)
