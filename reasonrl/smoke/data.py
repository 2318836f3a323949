"""The smoke tasks as verl RL parquet files (verl's ``RLHFDataset`` format), one data set per
recipe so each recipe's CPU run exercises its own rewards (``reasonrl.smoke.arithmetic``):

- ``mimo``: plain problems graded by Math-Verify plus one code problem in four, judged in the
  sandbox, carrying reference solutions' verdicts on its tests (``extra_info.solution_test_verdicts``)
  that the plugins' ``reasonrl_prepare_rows`` turn into what their rewards read (the rewards
  plugin: a test-difficulty calibration in the ground truth, MiMo §3.3.1);
- ``nemotron``: plain problems, half with "detailed thinking on", half "off"
  (``extra_info.thinking``; the rewards plugin's dataset class puts the toggle into the prompt);
- ``nemotron_if``: the nemotron rows as instruction-following tasks (Llama-Nemotron §6.1): each
  carries IFEval constraints in ``extra_info`` (``instruction_id_list`` + ``kwargs``: the sum as a
  keyword, fewer than two words after any ``</think>``: "the sum, alone"). The prompt stays the
  sum: the tiny model's vocabulary has no capitals or punctuation and an unseen system line
  breaks it (measured: exact answers 26 % -> 2 %), so the constraints are not spelled out in
  the prompt as a real IF data set's are;
- any other recipe: plain problems.

Every row carries its question in ``extra_info.question`` (as verl's example data sets do: what a
judge or reward model is shown). Training rows carry ``extra_info.pass_rate``: the share of 8 answers the warm-started model
samples right (``model.sampled_pass_rates``), the pre-computed pass rate that the offline
difficulty filter and the curricula read (Llama-Nemotron §5.1, MiMo §3.2, Kimi §2.3.4).
"""

from __future__ import annotations

import json
from pathlib import Path

from reasonrl.manager import get_plugin_manager
from reasonrl.smoke.arithmetic import CODE_DATA_SOURCE, DATA_SOURCE, INSTRUCTION_DATA_SOURCE, Problem

#: Every fourth mimo problem is a code problem.
CODE_EVERY = 4


def is_code_problem(recipe: str, index: int) -> bool:
    """Whether problem ``index`` of ``recipe``'s data set is posed as a code task."""
    return recipe == "mimo" and index % CODE_EVERY == CODE_EVERY - 1


def plain_row(problem: Problem, split: str, index: int) -> dict:
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": problem.prompt}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": problem.answer},
        "extra_info": {"split": split, "index": index, "thinking": None, "question": problem.prompt},
    }


def code_row(problem: Problem, split: str, index: int) -> dict:
    """A stdin/stdout code problem with its tests (a JSON ground truth) and the verdicts of
    reference solutions on them (``extra_info.solution_test_verdicts``: solutions × tests)."""
    inputs, outputs = problem.code_tests()
    truth = {"problem_id": f"add{problem.b}_{index}", "inputs": inputs, "outputs": outputs}
    verdicts = problem.code_calibration_verdicts()
    return {
        "data_source": CODE_DATA_SOURCE,
        "prompt": [{"role": "user", "content": problem.code_prompt}],
        "ability": "code",
        "reward_model": {"style": "rule", "ground_truth": json.dumps(truth)},
        "extra_info": {
            "split": split,
            "index": index,
            "thinking": None,
            "question": problem.code_prompt,
            "solution_test_verdicts": verdicts,
        },
    }


def instruction_row(problem: Problem, split: str, index: int) -> dict:
    """A nemotron row with verifiable constraints (IFEval ids and arguments, as IFEval's data
    holds them): the answer must contain the sum and be one word."""
    row = plain_row(problem, split, index)
    row["data_source"] = INSTRUCTION_DATA_SOURCE
    row["ability"] = "instruction_following"
    row["extra_info"]["instruction_id_list"] = ["keywords:existence", "length_constraints:number_words"]
    row["extra_info"]["kwargs"] = [{"keywords": [problem.answer]}, {"num_words": 2, "relation": "less than"}]
    return row


def verl_rows(problems: list[Problem], split: str, recipe: str = "", pass_rates=None) -> list[dict]:
    """One verl row per problem, in ``recipe``'s task mix (``pass_rates``: one per problem)."""
    rows = []
    for index, problem in enumerate(problems):
        if is_code_problem(recipe, index):
            row = code_row(problem, split, index)
        else:
            row = (instruction_row if recipe == "nemotron_if" else plain_row)(problem, split, index)
            if recipe in ("nemotron", "nemotron_if"):
                row["extra_info"]["thinking"] = "on" if index % 2 == 0 else "off"
        if pass_rates is not None:
            row["extra_info"]["pass_rate"] = float(pass_rates[index])
        rows.append(row)
    get_plugin_manager().hook.reasonrl_prepare_rows(rows=rows)  # pluggy's call: a plugin's error stops the data
    return rows


def write_parquet(problems: list[Problem], split: str, path: Path, recipe: str = "", pass_rates=None) -> Path:
    import pandas as pd

    if pass_rates is not None and len(pass_rates) != len(problems):
        raise ValueError(f"{len(pass_rates)} pass rates for {len(problems)} problems")
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(verl_rows(problems, split, recipe, pass_rates)).to_parquet(path)
    return path


def sft_rows(problems: list[Problem], task_mix: str, eos_token: str) -> list[dict]:
    """verl SFT rows (``messages``, verl's ``MultiTurnSFTDataset``) of ``problems`` in the RL recipe
    ``task_mix``'s formats, each answer ending with ``eos_token`` (the smoke chat template adds none,
    and a model must learn to stop): ``nemotron``/``nemotron_if`` give each problem twice, the
    reasoning answer under "detailed thinking on" and the bare answer under "off" (Llama-Nemotron's
    paired on/off responses); ``mimo`` poses every fourth problem as code; others plain."""
    from reasonrl.smoke.arithmetic import THINKING_TOGGLE, formatted

    rows = []
    for index, problem in enumerate(problems):
        if task_mix in ("nemotron", "nemotron_if"):
            for mode, answer in (("on", problem.thinking_answer), ("off", problem.answer)):
                rows.append(
                    [
                        {"role": "system", "content": THINKING_TOGGLE[mode]},
                        {"role": "user", "content": problem.prompt},
                        {"role": "assistant", "content": answer + eos_token},
                    ]
                )
            continue
        prompt, answer = formatted(problem, "code" if is_code_problem(task_mix, index) else "plain")
        rows.append([{"role": "user", "content": prompt}, {"role": "assistant", "content": answer + eos_token}])
    return [{"messages": messages} for messages in rows]


def write_sequences(
    out: Path, tokenizer, recipe: str = "mimo", sizes: tuple[int, int] = (4000, 300)
) -> tuple[Path, Path]:
    """``out/{train,held_out}.jsonl``: ``recipe``'s task mix as whole sequences (prompt + answer +
    EOS token ids, one ``{"input_ids": [...]}`` row each), for training extra heads on the smoke
    model's own outputs (e.g. ``reasonrl mtp attach --data``). Seeded, disjoint seeds per file."""
    from reasonrl.smoke.arithmetic import formatted, make_problems

    def rows(count: int, seed: int) -> list[list[int]]:
        return [
            tokenizer(prompt)["input_ids"] + tokenizer(answer)["input_ids"] + [tokenizer.eos_token_id]
            for index, problem in enumerate(make_problems(count, seed=seed, max_operand=99))
            for prompt, answer in [formatted(problem, "code" if is_code_problem(recipe, index) else "plain")]
        ]

    out.mkdir(parents=True, exist_ok=True)
    paths = (out / "train.jsonl", out / "held_out.jsonl")
    for path, count, seed in zip(paths, sizes, (11, 12)):
        path.write_text("".join(json.dumps({"input_ids": row}) + "\n" for row in rows(count, seed)))
    return paths
