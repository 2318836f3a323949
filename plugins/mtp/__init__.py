"""mtp: multi-token prediction (MiMo §2.2, after DeepSeek-V3; SPEC §5).

In progress (issue 9): the framework-free MTP module, its loss and MiMo's λ schedule
(``core.py``). Still to come: the Hugging Face attachment and MiMo checkpoint layout, the verl
SFT/RL integration and megatron-core's own MTP mapping, replication, vLLM drafting, the bench.
"""

from __future__ import annotations

from reasonrl.contracts import PluginInfo
from reasonrl.hookspecs import hookimpl


@hookimpl
def reasonrl_plugin_info() -> PluginInfo:
    return PluginInfo(name="mtp", summary="multi-token prediction: MTP module and loss with MiMo's λ schedule (in progress)", reports=("MiMo §2.2",))
