"""vLLM bridge: the target of reasonrl's ``vllm.general_plugins`` entry point.

vLLM calls each general plugin function once per process (engine core, workers, API
server); :func:`register` is idempotent, so a second call in one process does nothing.
"""

from reasonrl.bridges import BridgeStatus, run_bridge


def register() -> BridgeStatus:
    """Apply reasonrl's vLLM patches and registrations in this process."""
    return run_bridge("vllm")
