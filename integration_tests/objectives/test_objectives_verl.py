"""The objectives plugin against the real verl: discovery in a fresh process, the Megatron
actor config, the CLI's config output. (The CPU training run whose ε_pos_high schedule reaches
the loss in verl's actor worker: the longcat run of test_cpu_main_job.py.)"""

from __future__ import annotations

import pytest
import torch
import yaml

from reasonrl.testing.fresh_process import python_fresh, reasonrl_fresh

pytestmark = pytest.mark.integration


def test_bare_import_verl_resolves_both_losses():
    code = (
        "import verl\n"
        "from verl.trainer.ppo.core_algos import get_policy_loss_fn\n"
        "print(get_policy_loss_fn('longcat').__module__, get_policy_loss_fn('kimi_mirror_descent').__module__)\n"
    )
    result = python_fresh(code)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-2:] == ["reasonrl.plugins.objectives.verl_losses"] * 2


def test_trainer_mode_is_registered_where_verl_looks_it_up():
    """verl's TaskRunner process imports verl.trainer.main_ppo first; plain workers skip it."""
    task_runner = python_fresh(
        "import verl.trainer.main_ppo\nfrom verl.trainer.ppo.v1 import get_trainer_cls\n"
        "from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync\n"
        "from verl.trainer.ppo.v1.trainer_colocate_async import PPOTrainerColocateAsync\n"
        "from reasonrl.bridges.verl_trainer_classes import ReasonrlTrainerMixin as M\n"
        "sync, colocate = get_trainer_cls('reasonrl_sync'), get_trainer_cls('reasonrl_colocate_async')\n"
        "print(issubclass(sync, (M, PPOTrainerSync)) and issubclass(colocate, PPOTrainerColocateAsync), "
        "issubclass(sync, M) and issubclass(colocate, M) and not issubclass(colocate, PPOTrainerSync), "
        "sync.VERL_MODE, colocate.VERL_MODE)"
    )
    worker = python_fresh("import verl, sys\nprint('verl.trainer.ppo.v1.trainer_base' in sys.modules)")
    # both of reasonrl's modes: one mixin (callbacks, prompt source, state) on verl's two trainers
    assert task_runner.stdout.split()[-4:] == ["True", "True", "sync", "colocate_async"], task_runner.stderr[-2000:]
    assert worker.stdout.split()[-1] == "False", "a worker process does not pay for verl's trainer imports"


def test_megatron_actor_config_selects_the_same_losses():
    """verl's Megatron engine calls the same ppo_loss → policy-loss registry: build verl's
    Megatron actor config with the option file and resolve + run the loss from it."""
    from hydra import compose, initialize_config_module
    from verl.trainer.ppo.core_algos import get_policy_loss_fn
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import McoreActorConfig

    from reasonrl.plugins.objectives.tests.reference import longcat_equation_4

    with initialize_config_module("verl.trainer.config", version_base=None):
        config = compose(
            "ppo_megatron_trainer",
            overrides=[
                "hydra.searchpath=[pkg://reasonrl.hydra_configs]",
                "+reasonrl/objective=longcat",
                "data.max_response_length=16",
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
            ],
        )
    actor = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    assert isinstance(actor, McoreActorConfig) and actor.policy_loss.loss_mode == "longcat"
    loss_fn = get_policy_loss_fn(actor.policy_loss.loss_mode)
    generator = torch.Generator().manual_seed(0)
    old = -torch.rand(4, 16, generator=generator, dtype=torch.float64)
    log_prob = old + torch.randn(4, 16, generator=generator, dtype=torch.float64)
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5], dtype=torch.float64)[:, None].expand(4, 16).clone()
    mask = torch.ones(4, 16, dtype=torch.bool)
    actor.global_batch_info.update(
        dp_size=1, batch_num_tokens=None, global_batch_size=4, loss_scale_factor=actor.loss_scale_factor
    )
    loss, metrics = loss_fn(old, log_prob, advantages, mask, actor.loss_agg_mode, actor, None)
    expected = longcat_equation_4(
        log_prob, old, old, advantages, mask, 0.2, 0.28, 3.0, 2.0, 16
    )  # rollout = old: TIS weight 1
    assert torch.allclose(loss, expected, atol=1e-9) and "actor/longcat/clipfrac_dual_floor" in metrics


def test_cfg_job_shows_the_mapped_verl_keys():
    raw = reasonrl_fresh(["train", "recipe=mimo", "+reasonrl/objective=longcat", "--cfg", "job"])
    assert raw.returncode == 0, raw.stderr
    actor = yaml.safe_load(raw.stdout)["actor_rollout_ref"]["actor"]
    assert (
        actor["clip_ratio_high"] == "${reasonrl.objective.eps_pos_high}"
        and actor["loss_scale_factor"] == "${reasonrl.objective.t_max}"
    )
    resolved = reasonrl_fresh(
        [
            "train",
            "recipe=mimo",
            "+reasonrl/objective=longcat",
            "reasonrl.objective.eps_pos_high=0.3",
            "--cfg",
            "job",
            "--resolve",
        ]
    )
    config = yaml.safe_load(resolved.stdout)
    assert config["actor_rollout_ref"]["actor"]["clip_ratio_high"] == 0.3
    assert config["algorithm"]["rollout_correction"] == {
        **config["algorithm"]["rollout_correction"],
        "rollout_is": "token",
        "rollout_is_threshold": 2.0,
    }


def test_invalid_knob_stops_the_cli_before_any_work():
    result = reasonrl_fresh(["train", "recipe=longcat", "reasonrl.objective.eps_neg_high=0.9", "--cfg", "job"])
    assert (
        result.returncode == 2 and "reasonrl.objective.eps_neg_high" in result.stderr and "(1.0, inf)" in result.stderr
    )
    assert result.stdout == ""


def test_kimi_optimizer_reset_is_built_by_verls_own_optimizer_factory():
    """Kimi §2.3.2: verl's ``build_optimizer`` (what its FSDP engines call) builds the resetting
    AdamW from the recipe's optimizer class path, with the run's optimizer steps per iteration."""
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config.optimizer import build_optimizer

    from reasonrl.cli.train import compose_config, resolve_in_driver
    from reasonrl.plugins.objectives.optimizer import IterationResetAdamW

    for overrides, steps in ((["recipe=kimi_k15"], 4), (["recipe=kimi_k15", "+preset=cpu_tiny"], 2)):
        config = compose_config(overrides)
        resolve_in_driver(config)
        optimizer = build_optimizer(
            [torch.nn.Parameter(torch.zeros(3))], omega_conf_to_dataclass(config.actor_rollout_ref.actor.optim)
        )
        assert isinstance(optimizer, IterationResetAdamW) and optimizer.updates_per_iteration == steps
        assert optimizer.defaults["lr"] == config.actor_rollout_ref.actor.optim.lr
    resolved = reasonrl_fresh(["train", "recipe=kimi_k15", "--cfg", "job", "--resolve"])
    assert resolved.returncode == 0, resolved.stderr
    optim = yaml.safe_load(resolved.stdout)["actor_rollout_ref"]["actor"]["optim"]
    assert optim["override_optimizer_config"] == {"updates_per_iteration": 4}
    wrong = reasonrl_fresh(
        [
            "train",
            "recipe=kimi_k15",
            "actor_rollout_ref.actor.optim.override_optimizer_config.updates_per_iteration=3",
            "--cfg",
            "job",
        ]
    )
    assert wrong.returncode == 2 and "updates_per_iteration: is 3 but one iteration makes 4" in wrong.stderr
