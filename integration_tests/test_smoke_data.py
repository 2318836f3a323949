"""The smoke assets go through verl's real data path: every recipe's data set loads in the
dataset class its config selects (the nemotron option's thinking-toggle dataset), every prompt
fits ``data.max_prompt_length`` and every reference answer fits ``data.max_response_length``."""

from __future__ import annotations

import dataclasses

import pytest

from reasonrl.smoke.model import TinyModelSpec

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def smoke_root(tmp_path_factory):
    from reasonrl.smoke.prepare import prepare

    return prepare(
        tmp_path_factory.mktemp("assets") / "smoke",
        dataclasses.replace(TinyModelSpec(), warmup_steps=2, warmup_target_accuracy=0),
    )


@pytest.mark.parametrize("recipe", ["mimo", "nemotron", "kimi_k15", "longcat"])
def test_each_recipes_data_loads_in_verls_dataset_and_fits_the_preset(smoke_root, recipe):
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.trainer.ppo.utils import create_rl_dataset

    from reasonrl.cli.train import compose_config
    from reasonrl.smoke.arithmetic import Problem, formatted
    from reasonrl.smoke.prepare import TRAIN_PROBLEMS

    config = compose_config([f"recipe={recipe}", "+preset=cpu_tiny", f"reasonrl.preset.assets={smoke_root}"])
    assert config.reward.get("custom_reward_function", {}).get("path") is None, "the recipe's own rewards grade"
    assert config.reward.reward_manager.name == "reasonrl"
    tokenizer = AutoTokenizer.from_pretrained(config.actor_rollout_ref.model.path)
    data_config = OmegaConf.merge(config.data, {"filter_overlong_prompts": True})
    dataset = create_rl_dataset(config.data.train_files, data_config, tokenizer, None, is_train=True)
    assert len(dataset) == TRAIN_PROBLEMS, "no prompt may be longer than data.max_prompt_length"
    rendered = []
    for index in range(8):
        row = dataset[index]
        rendered.append(tokenizer.apply_chat_template(row["raw_prompt"], tokenize=False, add_generation_prompt=True))
    lengths = [len(tokenizer(text)["input_ids"]) for text in rendered]
    assert max(lengths) <= config.data.max_prompt_length, rendered
    if recipe == "nemotron":
        assert type(dataset).__name__ == "ThinkingToggleDataset"
        assert [text.split("\n")[0] for text in rendered] == ["detailed thinking on", "detailed thinking off"] * 4
    else:
        assert not any("thinking" in text for text in rendered)
    if recipe == "mimo":
        assert sum(text.startswith("?+") for text in rendered) == 2  # every fourth row is a code problem
    longest = max(
        len(tokenizer("".join(formatted(Problem(99, 99), f)[1:]))["input_ids"]) for f in ("code", "thinking_on")
    )
    assert longest + 1 <= config.data.max_response_length  # + EOS
