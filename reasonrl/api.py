"""Public facade for code that uses reasonrl without the CLI (scripts, tests, other trainers)."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from reasonrl.config import ConfigError, validate_reasonrl_section
from reasonrl.contracts import ConfigGroup
from reasonrl.manager import call_each


def config_groups() -> dict[str, ConfigGroup]:
    """Every ``reasonrl.<group>`` any installed plugin declares, by group name."""
    groups: dict[str, ConfigGroup] = {}
    for plugin, declared in call_each("reasonrl_config_groups"):
        for group in declared:
            if group.name in groups:
                raise ConfigError(f"reasonrl.{group.name}", f"declared twice (again by plugin {plugin!r})")
            groups[group.name] = group
    return groups


def validate_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a composed run config: the ``reasonrl`` section against every plugin's schema,
    then each plugin's cross-field checks. Returns ``{group: validated schema instance}``."""
    from omegaconf import DictConfig, OmegaConf

    section = config.get("reasonrl")
    if isinstance(section, DictConfig):
        section = OmegaConf.to_container(section, resolve=True)
    validated = validate_reasonrl_section(section, config_groups())
    for _plugin, _result in call_each("reasonrl_check_config", reraise=(ConfigError,), config=config):
        pass  # a check answers by raising ConfigError; return values are ignored
    return validated


def megatron_layer_spec(name: str, **kwargs: Any) -> Any:
    """Build the Megatron-core layer spec that a plugin registered under ``name``."""
    builders: dict[str, Callable[..., Any]] = {}
    for _plugin, specs in call_each("reasonrl_megatron_layer_specs"):
        builders.update(specs)
    if name not in builders:
        raise KeyError(f"no plugin provides a Megatron layer spec named {name!r}; known: {sorted(builders)}")
    return builders[name](**kwargs)


def calibrate_difficulty(verdicts, levels: int = 3, level_scores=None):
    """MiMo §3.3.1 calibration of one problem from a solutions × tests matrix of booleans:
    tests clustered by pass rate into ``levels`` levels, easiest first (rewards plugin)."""
    from reasonrl.plugins.rewards.difficulty import calibrate

    return calibrate(verdicts, levels=levels, level_scores=level_scores)


def test_difficulty_reward(passed, calibration, scheme: str = "strict") -> float:
    """One solution's test-difficulty reward: ``scheme`` ∈ {strict, soft, all_or_nothing};
    ``calibration`` is what :func:`calibrate_difficulty` returned (or its JSON)."""
    from reasonrl.plugins.rewards.difficulty import TestDifficulty, reward

    if isinstance(calibration, dict):
        calibration = TestDifficulty.from_json(calibration)
    return reward(passed, calibration, scheme)


test_difficulty_reward.__test__ = False  # a facade, not a pytest test


def math_reward(response: str, gold: str) -> float:
    """MiMo's math reward (rewards plugin, SPEC §2): 1.0 if the response's final answer (after
    ``</think>``) is equivalent to ``gold`` under Math-Verify, else 0.0. Graded in this
    process's pool of worker processes with a hard per-answer time bound on any thread
    (``reasonrl.rewards.math_timeout_s``, 5 s by default): an answer that cannot be graded in
    time, or that breaks the verifier, scores 0.0. The reward manager grades through the same
    path (``verify_math``), so in a reward worker both share one pool and its settings."""
    from reasonrl.plugins.rewards.math_reward import math_reward as grade

    return grade(response, gold)


def build_sampler(name, prompt_ids, **options):
    """A prompt sampler (sampling plugin, SPEC §3). ``name``: ``dynamic``, ``easy_pool``,
    ``curriculum``, ``prioritized``, ``gaussian_curriculum``, ``difficulty_filter``, or a list
    of them in pipeline order; ``options``: ``seed``, ``alpha``, ``pace_steps``, ... (the
    ``reasonrl.sampling`` knobs) and per-prompt ``pass_rates`` / ``difficulty``. The result
    has ``sample(batch_size)``, ``update({prompt id: [scores in 0..1]})``, ``metrics()``,
    ``state_dict()`` and ``load_state_dict(state)``. Bad options raise ConfigError naming the key."""
    from reasonrl.plugins.sampling.sampler import build_sampler as build

    return build(name, prompt_ids, **options)


def solve_architecture(quality, resources, budgets):
    """Puzzle's search (puzzle plugin, Llama-Nemotron §2): the variant index per layer that
    minimises the summed ``quality`` cost (layers × variants; ``numpy.inf`` = not allowed) with
    every ``resources[name]`` (layers × variants) summing to at most ``budgets[name]``. Exact
    (HiGHS MILP); raises ``InfeasibleBudget`` (a ValueError) when no choice fits."""
    from reasonrl.plugins.puzzle.search import solve

    return solve(quality, resources, budgets).choice.tolist()
