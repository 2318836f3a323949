"""``reasonrl data curate`` end to end on hand-made rows: a real model (the smoke model served by
``vllm serve``, vLLM's CPU build) answers for Kimi's easy-to-hack filter, the sandboxed judge runs
the code problem's reference solutions, the card counts the known drops, a second run resumes
(nothing reruns), and verl's own RL dataset reads the output."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from reasonrl.plugins.curation.easy_to_hack import openai_answerer
from reasonrl.smoke.prepare import prepare
from reasonrl.vllm_server import free_port, serve

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ADD = "a, b = map(int, input().split())\nprint(a + b)"
ADD_TOO = "print(sum(map(int, input().split())))"
CONFIG = {
    "fields": {"question": "q", "answer": "a", "tests": "tests", "solutions": "solutions"},
    "stages": [
        {"decontaminate": {"n": 16}},
        {"exact_dedup": {}},
        {"verifiable_answer": {}},
        {"easy_to_hack": {"tries": 4, "prompt_template": "{question}"}},  # the smoke model's own prompt form
        {"code_tests": {"test_pass_fraction": 0.7, "problem_pass_fraction": 0.9}},
    ],
    "output": {"data_source": "curated/smoke"},
}


@pytest.fixture(scope="module")
def smoke_model(tmp_path_factory):
    model = prepare() / "model"
    port = free_port()
    server = serve(model, port, tmp_path_factory.mktemp("serve") / "serve.log", max_model_len=64, max_num_seqs=16)
    yield f"http://127.0.0.1:{port}", str(model)
    server.terminate()
    server.wait(timeout=60)


def test_curate_with_a_served_model_the_judge_and_a_resume(smoke_model, tmp_path):
    url, model = smoke_model
    greedy = openai_answerer(url, model, max_tokens=16, temperature=0.0)
    (reply,) = greedy(["12+34="], 1)[0]
    guessed = re.findall(r"\d+", reply.split("</think>")[-1])
    assert guessed, f"the smoke model's greedy answer has no number: {reply!r}"
    rows = [
        {"q": "12+34=", "a": guessed[-1]},  # hackable by construction: the reference is what the model answers
        {"q": "50+49=", "a": "1000003"},  # a number it never writes
        {"q": "12 + 34 =", "a": guessed[-1]},  # an exact duplicate of the first
        {"q": "77+11=", "a": "88"},  # in the evaluation set
        {"q": "add two numbers", "a": "", "solutions": [ADD, ADD_TOO],
         "tests": {"inputs": ["1 2", "3 4", "5 5"], "outputs": ["3", "7", "11"]}},  # "5 5" -> 11 is wrong
    ]  # fmt: skip
    for row in rows:
        row.setdefault("tests", None)
        row.setdefault("solutions", None)
    (tmp_path / "raw.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "eval.jsonl").write_text(json.dumps({"problem": "77+11="}) + "\n")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    command = [sys.executable, "-m", "reasonrl.cli.main", "data", "curate", "--config", str(tmp_path / "config.yaml"),
               "--source", str(tmp_path / "raw.jsonl"), "--out", str(tmp_path / "out"), "--eval", str(tmp_path / "eval.jsonl"),
               "--answer-url", url, "--answer-model", model, "--answer-temperature", "0", "--answer-max-tokens", "16", "--no-progress"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(done.stdout)
    card = json.loads((tmp_path / "out" / "card.json").read_text())
    assert {e["stage"]: e["dropped"] for e in card["stages"]} == {
        "decontaminate": {"contaminated": 1},
        "exact_dedup": {"exact_duplicate": 1},
        "verifiable_answer": {},
        "easy_to_hack": {"easy_to_hack": 1},
        "code_tests": {},
    }
    assert card["stages"][-1]["counters"] == {"tests_removed_from_kept_problems": 1}
    assert card["output"]["rows"] == 2

    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((tmp_path / "out" / "card.json").read_text())["stages"] == card["stages"], "resumed: no rerun"

    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    tokenizer = AutoTokenizer.from_pretrained(model)
    dataset = RLHFDataset(
        [str(tmp_path / "out" / "train.parquet")], tokenizer, OmegaConf.create({"max_prompt_length": 64})
    )
    assert len(dataset) == 2
    code = dataset.dataframe[1]
    truth = json.loads(code["reward_model"]["ground_truth"])
    assert truth["inputs"] == ["1 2", "3 4"] and code["extra_info"]["solution_test_verdicts"] == [[True, True]] * 2
    first = dataset[0]  # what verl's agent loop is handed
    assert first["raw_prompt"] == [{"role": "user", "content": "50+49="}] and first["data_source"] == "curated/smoke"
