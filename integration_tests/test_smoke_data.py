"""The smoke assets go through verl's real data path and reward loading."""

from __future__ import annotations

import dataclasses

import pytest

from reasonrl.smoke.model import TinyModelSpec

pytestmark = pytest.mark.integration


def test_parquet_loads_in_verls_rl_dataset_and_reward_loads_by_package_path(tmp_path):
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from reasonrl.cli.train import compose_config
    from reasonrl.smoke.prepare import TRAIN_PROBLEMS, prepare

    root = prepare(tmp_path / "smoke", dataclasses.replace(TinyModelSpec(), warmup_steps=2))
    config = compose_config(["recipe=mimo", "+preset=cpu_tiny", f"reasonrl.preset.assets={root}"])
    tokenizer = AutoTokenizer.from_pretrained(config.actor_rollout_ref.model.path)
    dataset = RLHFDataset(
        data_files=[config.data.train_files],
        tokenizer=tokenizer,
        config=OmegaConf.merge(config.data, {"filter_overlong_prompts": True}),
    )
    assert len(dataset) == TRAIN_PROBLEMS, "no prompt may be longer than data.max_prompt_length"
    row = dataset[0]
    reward = get_custom_reward_fn(config)
    truth = row["reward_model"]["ground_truth"]
    assert reward(row["data_source"], truth, truth, row["extra_info"]) == 1.0
    assert reward(row["data_source"], truth + "1", truth, row["extra_info"]) == 0.0
