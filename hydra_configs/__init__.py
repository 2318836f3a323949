"""Hydra configs: reasonrl's primary config, one recipe per report, presets, plugin groups.

Composed on top of verl's own trainer config (search path ``pkg://verl.trainer.config``).
"""
