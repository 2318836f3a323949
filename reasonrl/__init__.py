"""reasonrl: the techniques of four reasoning-model reports as plugins for verl, vLLM and
Megatron-core. See docs/architecture.md; the plugin contract is :mod:`reasonrl.hookspecs`."""

__version__ = "0.1.0"
