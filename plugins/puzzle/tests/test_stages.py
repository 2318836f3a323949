"""Pipeline stages that need no training: the parent stage records a real parent once and a
resumed run skips it (it used to fail with FileExistsError on the second run)."""

from __future__ import annotations

from transformers import LlamaConfig, LlamaForCausalLM

from reasonrl.plugins.puzzle.pipeline import Pipeline, PuzzleSettings


def test_a_real_parent_is_recorded_once_and_a_resumed_run_skips_the_stage(tmp_path):
    parent = tmp_path / "llama"
    config = LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2
    )
    LlamaForCausalLM(config).save_pretrained(parent)
    pipeline = Pipeline(PuzzleSettings(parent=str(parent)), tmp_path / "run", log=lambda line: None)
    pipeline.run(["parent"])
    recorded = tmp_path / "run" / "parent" / "SOURCE"
    assert recorded.read_text() == str(parent.resolve())
    pipeline.run(["parent"])  # resume
    assert recorded.read_text() == str(parent.resolve())
