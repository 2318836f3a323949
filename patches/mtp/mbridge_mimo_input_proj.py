"""mbridge 0.15.1's MiMo bridge copies MiMo's ``model.mtp_layers.{k}.input_proj.weight`` into
megatron-core's ``mtp.layers.{k}.eh_proj.weight`` as is (``mbridge/models/mimo.py``,
``_convert_mtp_param``: a direct name map). The two concatenate their inputs in opposite orders:
MiMo (and vLLM's MiMo drafter) ``[hidden ; embedding]``, megatron-core 0.16.1
(``MultiTokenPredictionLayer._concat_embeddings``) ``[embedding ; hidden]``. Loaded as is, depth k
projects each half with the other's weights. This patch swaps the two input halves both ways
(load and export), so a MiMo checkpoint trained on Megatron is the checkpoint vLLM drafts with.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from reasonrl.patching import Patch

if TYPE_CHECKING:  # torch is imported where it is used: listing patches imports no torch
    import torch

_NAME = "eh_proj.weight"


def swap_input_halves(weight: torch.Tensor) -> torch.Tensor:
    """[H, 2H] ``[a | b]`` → ``[b | a]`` along the input dimension (its own inverse)."""
    import torch

    first, second = weight.chunk(2, dim=1)
    return torch.cat([second, first], dim=1)


def _apply() -> None:
    from mbridge.models.mimo import MimoBridge

    to_mcore, to_hf = MimoBridge._weight_to_mcore_format, MimoBridge._weight_to_hf_format

    @functools.wraps(to_mcore)
    def weight_to_mcore_format(self, mcore_weights_name, hf_weights):
        weight = to_mcore(self, mcore_weights_name, hf_weights)
        return swap_input_halves(weight) if mcore_weights_name.endswith(_NAME) else weight

    @functools.wraps(to_hf)
    def weight_to_hf_format(self, mcore_weights_name, mcore_weights):
        names, weights = to_hf(self, mcore_weights_name, mcore_weights)
        if mcore_weights_name.endswith(_NAME):
            weights = [swap_input_halves(weight) for weight in weights]
        return names, weights

    MimoBridge._weight_to_mcore_format = weight_to_mcore_format
    MimoBridge._weight_to_hf_format = weight_to_hf_format


PATCH = Patch(
    name="mbridge-mimo-input-proj",
    package="mbridge",
    versions=">=0.15.1,<0.16",
    changes=(
        "mbridge.models.mimo.MimoBridge: the MTP layers' eh_proj <-> input_proj weights get their two input halves "
        "swapped on load and export ([embedding ; hidden] in megatron-core, [hidden ; embedding] in MiMo). Applied "
        "by the mtp plugin's Megatron adapter when verl's Megatron engine builds a MiMo model with MTP."
    ),
    upstream_issue="",  # none filed
    upstream_problem="mbridge's MiMo name map copies input_proj into eh_proj without reordering the concatenated inputs",
    apply=_apply,
    trigger="manual",
)
