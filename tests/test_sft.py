"""``reasonrl sft``'s pure parts: the group names it passes to Hydra, the smoke SFT rows (Nemotron's
paired on/off responses), and the checkpoint whose Hugging Face model the RL recipe starts from."""

from __future__ import annotations

from reasonrl.sft import hf_output, sft_overrides
from reasonrl.smoke.arithmetic import Problem
from reasonrl.smoke.data import sft_rows


def test_recipe_and_preset_name_the_sft_groups_and_nothing_else():
    assert sft_overrides(["recipe=mimo_sft", "+preset=cpu_tiny", "data.max_length=9", "optim.lr=1"]) == [
        "sft_recipe=mimo_sft",
        "+sft_preset=cpu_tiny",
        "data.max_length=9",
        "optim.lr=1",
    ]
    assert sft_overrides(["model.recipe=x", "trainer.preset=y"]) == ["model.recipe=x", "trainer.preset=y"]


def test_nemotron_rows_pair_each_prompt_with_a_reasoning_and_a_bare_answer():
    problems = [Problem(12, 34), Problem(5, 6)]
    rows = sft_rows(problems, "nemotron", "<eos>")
    assert len(rows) == 4
    on, off = rows[0]["messages"], rows[1]["messages"]
    assert on[0] == {"role": "system", "content": "detailed thinking on"}
    assert off[0] == {"role": "system", "content": "detailed thinking off"}
    assert on[1] == off[1] == {"role": "user", "content": "12+34="}
    assert on[2]["content"] == "<think>12+34</think>46<eos>" and off[2]["content"] == "46<eos>"


def test_mimo_rows_follow_its_rl_task_mix_and_end_with_eos():
    rows = sft_rows([Problem(a, 1) for a in range(8)], "mimo", "<eos>")
    prompts = [row["messages"][0]["content"] for row in rows]
    assert prompts[3] == "?+1=" and prompts[7] == "?+1=" and prompts[0] == "0+1="  # every fourth: code
    assert rows[3]["messages"][1]["content"] == "```\nprint(int(input())+1)\n```<eos>"
    assert all(row["messages"][-1]["content"].endswith("<eos>") for row in rows)
    assert sft_rows([Problem(1, 2)], "longcat", "")[0]["messages"] == [
        {"role": "user", "content": "1+2="},
        {"role": "assistant", "content": "3"},
    ]


def test_the_newest_checkpoint_with_weights_is_the_output(tmp_path):
    for step, weights in ((2, True), (10, True), (12, False)):
        model = tmp_path / f"global_step_{step}" / "huggingface"
        model.mkdir(parents=True)
        (model / "config.json").write_text("{}")
        if weights:
            (model / "model.safetensors").write_bytes(b"")
    (tmp_path / "global_step_9x").mkdir()
    assert hf_output(tmp_path) == tmp_path / "global_step_10" / "huggingface"  # 12 has no weights; 10 > 2
    assert hf_output(tmp_path / "none") is None
