"""The rewards plugin through verl 0.9.1's own code paths, on CPU.

- reward manager ``reasonrl``: verl's ``RewardLoopWorker`` (the object verl's reward loop
  runs in its Ray actors) built from a recipe config, scoring a real ``DataProto`` — code
  through the sandboxed judge with a calibration, math through Math-Verify, truncation and
  repetition flags, a judge outage as ``judge_error``;
- the group step (length penalty, masking) on the jagged TensorDict layout verl's
  TransferQueue holds, followed by verl's ``compute_advantage`` with ``masked_grpo``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.integration

MAX_RESPONSE = 200
SUM_PROBLEM = {"inputs": ["1 2\n", "10 20\n", "100000 200000\n"], "outputs": ["3\n", "30\n", "300000\n"]}
# test pass rates 1.0, 1.0, 0.25 → two levels: {0, 1} easy, {2} hard
SUM_CALIBRATION = {"levels": [0, 0, 1], "level_scores": [0.5, 0.5], "pass_rates": [1.0, 1.0, 0.25], "num_solutions": 4}


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    """A byte-level tokenizer (one token per byte): any response text round-trips exactly."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    vocab |= {"<pad>": len(vocab), "<eos>": len(vocab) + 1}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    path = tmp_path_factory.mktemp("tokenizer")
    PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>").save_pretrained(path)
    return path


def _worker(tokenizer_dir, *overrides):
    import verl  # noqa: F401  (reasonrl's bridge registers the reward manager where verl loads it)
    from verl.experimental.reward_loop import RewardLoopWorker

    from reasonrl.cli.train import compose_config

    config = compose_config(
        [
            "recipe=mimo",
            f"actor_rollout_ref.model.path={tokenizer_dir}",
            f"data.max_response_length={MAX_RESPONSE}",
            "reward.num_workers=1",
            *overrides,
        ]
    )
    return RewardLoopWorker(config)


def _batch(tokenizer, rows):
    """A DataProto as verl's agent loop hands it to the reward loop: left-padded prompts, right-padded responses."""
    from tensordict import TensorDict
    from verl import DataProto

    prompt_ids = [tokenizer(r["prompt"], add_special_tokens=False)["input_ids"] for r in rows]
    response_ids = [
        r["response_ids"] if "response_ids" in r else tokenizer(r["response"], add_special_tokens=False)["input_ids"]
        for r in rows
    ]
    p_len, r_len = max(map(len, prompt_ids)), max(map(len, response_ids))
    pad = tokenizer.pad_token_id or 0
    prompts = torch.tensor([[pad] * (p_len - len(p)) + p for p in prompt_ids])
    responses = torch.tensor([r + [pad] * (r_len - len(r)) for r in response_ids])
    mask = torch.tensor(
        [
            [0] * (p_len - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (r_len - len(r))
            for p, r in zip(prompt_ids, response_ids)
        ]
    )
    batch = TensorDict(
        {
            "prompts": prompts,
            "responses": responses,
            "attention_mask": mask,
            "input_ids": torch.cat([prompts, responses], 1),
        },
        batch_size=len(rows),
    )
    return DataProto(
        batch=batch,
        non_tensor_batch={
            "data_source": np.array([r.get("data_source", "test") for r in rows], dtype=object),
            "reward_model": np.array([{"ground_truth": r["ground_truth"]} for r in rows], dtype=object),
            "extra_info": np.array([r.get("extra_info", {}) for r in rows], dtype=object),
        },
    )


def _fence(code: str) -> str:
    return f"<think>add them</think>\n```python\n{code}```\n"


def test_reward_manager_through_verls_reward_loop_worker(tokenizer_dir):
    from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

    from reasonrl.plugins.rewards.verl_reward_manager import ReasonrlRewardManager

    worker = _worker(tokenizer_dir)
    assert type(worker.reward_manager) is ReasonrlRewardManager
    tokenizer = worker.input_tokenizer
    calibrated = json.dumps(SUM_PROBLEM | {"difficulty": SUM_CALIBRATION})
    loop_tokens = tokenizer("ab ", add_special_tokens=False)["input_ids"] * MAX_RESPONSE
    rows = [
        {
            "prompt": "sum",
            "response": _fence("a, b = map(int, input().split())\nprint(a + b)\n"),
            "ground_truth": calibrated,
        },
        {
            "prompt": "sum",
            "response": _fence("a, b = map(int, input().split())\nprint(a + b if a < 1000 else 0)\n"),
            "ground_truth": calibrated,
        },
        {"prompt": "sum", "response": _fence("print(3)\n"), "ground_truth": calibrated},
        {
            "prompt": "inc",
            "response": _fence("def inc(x):\n    return x + 1\n"),
            "ground_truth": {"assertions": ["assert inc(1) == 2", "assert inc(2) == 3"]},
        },
        {"prompt": "half", "response": "It is \\boxed{\\frac{1}{2}}", "ground_truth": "0.5"},
        {"prompt": "half", "response": "It is \\boxed{2}", "ground_truth": "0.5"},
        {"prompt": "long", "response_ids": [(7 * i) % 200 + 33 for i in range(MAX_RESPONSE)], "ground_truth": "7"},
        {"prompt": "loop", "response_ids": loop_tokens[:MAX_RESPONSE], "ground_truth": "7"},
        {
            "prompt": "ends",
            "response_ids": [(7 * i) % 200 + 33 for i in range(MAX_RESPONSE - 1)] + [tokenizer.eos_token_id],
            "ground_truth": "-98765",
        },
    ]
    data = _batch(tokenizer, rows)
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))
    scores = [o["reward_score"] for o in outputs]
    extra = [o["reward_extra_info"] for o in outputs]
    # strict scheme: all pass → 1; the hard level fails → the easy level's 0.5; the easy level fails → 0
    assert scores[:3] == [pytest.approx(1.0), pytest.approx(0.5), pytest.approx(0.0)]
    assert [e["code_level_pass"] for e in extra[:3]] == ["11", "10", "00"]
    assert [e["code_levels_passed"] for e in extra[:3]] == [2.0, 1.0, 0.0]
    assert extra[2]["code_tests_passed"] == pytest.approx(1 / 3)
    assert scores[3] == 1.0 and extra[3]["acc"] == 1.0  # uncalibrated assertions: all or nothing
    assert scores[4:6] == [1.0, 0.0]  # Math-Verify
    assert [e["acc"] for e in extra] == [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    # at the limit without EOS: cut; a loop at the limit is a real failure; EOS at the limit is not a cut
    assert [e["truncated"] for e in extra] == [0.0] * 6 + [1.0, 1.0, 0.0]
    assert [e["repetitive"] for e in extra] == [0.0] * 7 + [1.0, 0.0]
    assert [e["incomplete"] for e in extra] == [0.0] * 6 + [1.0, 0.0, 0.0]
    assert all(e["judge_error"] == 0.0 for e in extra)
    assert len({tuple(sorted(e)) for e in extra}) == 1  # verl takes the key list from the first sample
    rm_scores = RewardManagerBase.assemble_rm_scores(data, scores)
    assert torch.allclose(rm_scores.sum(-1), torch.tensor(scores, dtype=torch.float32))


def test_a_hostile_math_answer_in_a_batch_does_not_stall_verls_reward_loop(tokenizer_dir):
    """verl grades each trajectory in an executor thread, where Math-Verify's own SIGALRM
    timeouts cannot work: a power tower used to freeze the whole reward process."""
    import time

    from reasonrl.plugins.rewards.verl_group import reward_counts

    worker = _worker(tokenizer_dir, "reasonrl.rewards.math_timeout_s=2")
    rows = [
        {"prompt": "tower", "response": "It is \\boxed{9^{9^{9^{9}}}}", "ground_truth": "7"},
        {"prompt": "half", "response": "It is \\boxed{\\frac{1}{2}}", "ground_truth": "0.5"},
        {"prompt": "towers", "response": "\\boxed{9^{9^{9^{9}}} - 8^{8^{8^{8}}}}", "ground_truth": "7"},
        {"prompt": "pair", "response": "<think>(2, 1)?</think> \\boxed{(1, 2)}", "ground_truth": "(1,2)"},
        {
            "prompt": "sum",
            "response": _fence("a, b = map(int, input().split())\nprint(a + b)\n"),
            "ground_truth": json.dumps(SUM_PROBLEM),
        },
    ]
    start = time.monotonic()
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(_batch(worker.input_tokenizer, rows)))
    elapsed = time.monotonic() - start
    assert [o["reward_score"] for o in outputs] == [0.0, 1.0, 0.0, 1.0, 1.0]
    extra = [o["reward_extra_info"] for o in outputs]
    assert [e["math_timeout"] for e in extra] == [1.0, 0.0, 1.0, 0.0, 0.0]
    assert [e["task_kind"] for e in extra] == ["math"] * 4 + ["code"]
    counts = reward_counts(extra)
    assert counts.pop("reward/scoring_s") >= elapsed / 2  # summed over answers scored concurrently
    assert counts == {
        "reward/math_timeouts": 2.0,
        "reward/math_failures": 0.0,
        "reward/judge_errors": 0.0,
        "reward/math_graded": 2.0,  # the two towers timed out
        "reward/code_judged": 1.0,
        "reward/code_calibrated": 0.0,  # SUM_PROBLEM carries no calibration: all or nothing
        "reward/code_partial_credit": 0.0,
        "reward/code_score_mean": 1.0,
        "reward/format_checked": 0.0,  # no toggle in these prompts
        "reward/format_ok_frac": 0.0,
    }
    assert elapsed < 30.0, f"{elapsed:.1f} s for five answers"


def test_judge_outage_is_flagged_not_scored(tokenizer_dir):
    worker = _worker(
        tokenizer_dir,
        "reasonrl.rewards.judge_backend=sandbox_fusion",
        "reasonrl.rewards.sandbox_fusion_url=http://127.0.0.1:9/run_code",
    )
    data = _batch(
        worker.input_tokenizer,
        [{"prompt": "sum", "response": _fence("print(3)\n"), "ground_truth": json.dumps(SUM_PROBLEM)}],
    )
    (output,) = worker.loop.run_until_complete(worker.compute_score_batch(data))
    assert output["reward_extra_info"]["judge_error"] == 1.0
    assert output["reward_extra_info"]["incomplete"] == 1.0


def test_thinking_toggle_reward_reads_the_prompt(tokenizer_dir):
    worker = _worker(tokenizer_dir, "reasonrl.rewards.thinking_format_weight=0.5")
    rows = [
        {"prompt": "detailed thinking on\n2+2?", "response": "<think>2+2=4</think>\\boxed{4}", "ground_truth": "4"},
        {"prompt": "detailed thinking on\n2+2?", "response": "\\boxed{4}", "ground_truth": "4"},
        {"prompt": "detailed thinking off\n2+2?", "response": "\\boxed{4}", "ground_truth": "4"},
        {
            "prompt": "2+2?",
            "response": "<think>x</think>\\boxed{5}",
            "ground_truth": "4",
            "extra_info": {"thinking": "off"},
        },
        {"prompt": "2+2?", "response": "\\boxed{4}", "ground_truth": "4"},
    ]
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(_batch(worker.input_tokenizer, rows)))
    assert [o["reward_score"] for o in outputs] == [1.5, 1.0, 1.5, 0.0, 1.0]
    assert [o["reward_extra_info"]["format_ok"] for o in outputs] == [1.0, 0.0, 1.0, 0.0, -1.0]


def _tq_fields(uids, lengths, scores, extra):
    """The jagged per-response layout verl's TransferQueue returns for the group step's fields."""
    from tensordict import NonTensorData, NonTensorStack, TensorDict

    def nested(tensors):
        return torch.nested.as_nested_tensor(tensors, layout=torch.jagged)

    rm = []
    for length, score in zip(lengths, scores):
        row = torch.zeros(length)
        row[-1] = score
        rm.append(row)
    masks = [torch.ones(length, dtype=torch.int64) for length in lengths]
    return TensorDict(
        {
            "uid": NonTensorStack(*[NonTensorData(u) for u in uids]),
            "rm_scores": nested(rm),
            "response_mask": nested(masks),
            "loss_mask": nested([m.clone() for m in masks]),
            "extra_fields": NonTensorStack(*[NonTensorData({"reward_extra_info": e}) for e in extra]),
        },
        batch_size=len(uids),
    )


def _verl_advantages(out, uids, lengths, estimator: str):
    """verl's compute_advantage on the batch the way its V1 trainer builds it."""
    import verl  # noqa: F401
    from omegaconf import OmegaConf
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage

    width = max(lengths)

    def padded(nested):
        return torch.stack([torch.nn.functional.pad(t, (0, width - t.numel())) for t in nested.unbind()])

    data = DataProto.from_dict(
        tensors={
            "token_level_rewards": padded(out["rm_scores"]).float(),
            "response_mask": padded(out["response_mask"]).float(),
        },
        non_tensors={"uid": np.array(uids, dtype=object)},
    )
    config = OmegaConf.create({"norm_adv_by_std_in_grpo": True})
    return compute_advantage(
        data, adv_estimator=estimator, num_repeat=1, norm_adv_by_std_in_grpo=True, config=config
    ).batch["advantages"]


def test_group_step_masks_and_penalises_length_then_verl_computes_advantages():
    from reasonrl.plugins.rewards.config import RewardsConfig
    from reasonrl.plugins.rewards.verl_group import apply_group_step, register_estimator

    register_estimator()
    uids = ["a", "a", "a", "a", "b", "b"]
    lengths = [4, 8, 6, 12, 5, 5]
    scores = [1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    extra = [{"acc": s, "incomplete": 0.0} for s in scores]
    extra[3]["incomplete"] = 1.0  # truncated at the limit, not a loop: left out
    fields = _tq_fields(uids, lengths, scores, extra)
    settings = RewardsConfig(length_penalty_weight=0.5, length_penalty_warmup_steps=2, mask_incomplete=True)

    warm, warm_metrics = apply_group_step(fields, settings, step=2)  # still in the warm-up
    assert [float(t.sum()) for t in warm["rm_scores"].unbind()] == scores
    assert warm_metrics["reasonrl/incomplete_masked"] == 1.0

    out, metrics = apply_group_step(fields, settings, step=3)
    # group a without the masked response: lengths 4, 8, 6 → λ = 0.5, −0.5, 0; wrong → min(0, λ)
    expected = [1.0 + 0.5 * 0.5, 1.0 - 0.5 * 0.5, 0.0 + 0.5 * 0.0, 0.0, 1.0, 0.0]
    assert [float(t.sum()) for t in out["rm_scores"].unbind()] == pytest.approx(expected)
    assert [int(t.sum()) for t in out["response_mask"].unbind()] == [4, 8, 6, 0, 5, 5]
    assert [int(t.sum()) for t in out["loss_mask"].unbind()] == [4, 8, 6, 0, 5, 5]
    assert out["rm_scores"].unbind()[0][-1] == pytest.approx(1.25)  # added where the score sits
    assert metrics["reasonrl/incomplete_masked"] == 1.0 and metrics["reasonrl/incomplete_masked_frac"] == pytest.approx(
        1 / 6
    )
    # group a (4, 8, 6) varies, group b (5, 5) does not; two of a's three rewards are non-zero
    assert metrics["reasonrl/length_varied_groups"] == 1.0 and metrics["reasonrl/length_penalty_nonzero"] == 2.0

    advantages = _verl_advantages(out, uids, lengths, "masked_grpo")
    # reference: GRPO from the equation over the kept responses of each group
    kept_a = torch.tensor(expected[:3])
    ref_a = (kept_a - kept_a.mean()) / (kept_a.std() + 1e-6)
    kept_b = torch.tensor(expected[4:])
    ref_b = (kept_b - kept_b.mean()) / (kept_b.std() + 1e-6)
    per_response = [float(advantages[i, 0]) for i in range(6)]
    assert per_response[:3] == pytest.approx(ref_a.tolist(), abs=1e-5)
    assert per_response[4:] == pytest.approx(ref_b.tolist(), abs=1e-5)
    assert float(advantages[3].abs().sum()) == 0.0
    assert metrics["reasonrl/incomplete_mask_skipped"] == 0.0
    # a step where every response is incomplete keeps them all (verl refuses an empty loss mask)
    everything = _tq_fields(uids, lengths, scores, [{"acc": s, "incomplete": 1.0} for s in scores])
    kept, kept_metrics = apply_group_step(everything, settings, step=1)
    assert [int(t.sum()) for t in kept["response_mask"].unbind()] == lengths
    assert kept_metrics["reasonrl/incomplete_mask_skipped"] == 1.0 and kept_metrics["reasonrl/incomplete_masked"] == 0.0
    # with verl's plain GRPO the masked response would still shift its group's statistics
    plain = _verl_advantages(out, uids, lengths, "grpo")
    assert float(plain[0, 0]) != pytest.approx(per_response[0], abs=1e-3)
