"""The project's Hypothesis settings, loaded by pytest for every run (``addopts`` in pyproject.toml,
so also in the lifted-out plugin copies of ``test_plugin_alone``): no per-example deadline and no
"input generation is slow" health check. Both measure wall-clock time, which on CI's two cores
shared with vLLM and Megatron launches says how loaded the machine is, not whether a test is right
(a 36 s stall failed a reward property test once). Every property and assertion stays as written."""

from __future__ import annotations

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # hypothesis is a dev dependency; without it no test uses it
    pass
else:
    settings.register_profile("reasonrl", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("reasonrl")
