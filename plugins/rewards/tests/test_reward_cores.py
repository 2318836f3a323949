"""Math (Math-Verify), thinking-toggle format, Kimi length penalty, incomplete-signal rules."""

from __future__ import annotations

import re
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonrl.plugins.rewards.code_extraction import extract_code, fenced_blocks
from reasonrl.plugins.rewards.incomplete_signal import is_incomplete, is_repetitive, is_truncated
from reasonrl.plugins.rewards.length_penalty import length_rewards, penalty_weight
from reasonrl.plugins.rewards.math_reward import math_reward
from reasonrl.plugins.rewards.thinking_format import format_ok, thinking_mode, with_thinking_prompt


@pytest.mark.parametrize(
    ("response", "gold", "expected"),
    [
        ("so the answer is \\boxed{\\frac{1}{2}}", "0.5", 1.0),
        ("<think>maybe 3? no</think> The answer is $\\boxed{4}$.", "4", 1.0),
        ("<think>it is 4</think> The answer is $\\boxed{3}$.", "4", 0.0),  # only the answer part counts
        ("\\boxed{x^2 + 2x + 1}", "(x+1)^2", 1.0),
        ("I don't know", "7", 0.0),
    ],
)
def test_math_reward(response, gold, expected):
    assert math_reward(response, gold) == expected


def test_math_reward_works_off_the_main_thread():
    results = []
    thread = threading.Thread(target=lambda: results.append(math_reward("\\boxed{12}", "12")))
    thread.start()
    thread.join()
    assert results == [1.0]


@pytest.mark.parametrize(
    ("response", "mode", "ok"),
    [
        ("<think>step 1, step 2</think>The answer is 4.", "on", True),
        ("\n<think>\nreasoning\n</think>\n\n4", "on", True),
        ("The answer is 4.", "on", False),  # no think block
        ("<think>reasoning</think>", "on", False),  # no answer after it
        ("<think></think>4", "on", False),  # empty reasoning
        ("<think>a</think>4<think>b</think>5", "on", False),  # two blocks
        ("preamble <think>a</think> 4", "on", False),  # not at the start
        ("The answer is 4.", "off", True),
        ("<think>a</think>4", "off", False),
        ("4 </think>", "off", False),
    ],
)
def test_thinking_format(response, mode, ok):
    assert format_ok(response, mode) is ok


def test_thinking_prompt_transform():
    prompt = [{"role": "user", "content": "2+2?"}]
    on = with_thinking_prompt(prompt, True)
    assert on == [{"role": "system", "content": "detailed thinking on"}, {"role": "user", "content": "2+2?"}]
    assert thinking_mode(on) == "on"
    off = with_thinking_prompt(on, "off")  # replaces the toggle, never adds a second system message
    assert off[0] == {"role": "system", "content": "detailed thinking off"} and len(off) == 2
    kept = with_thinking_prompt([{"role": "system", "content": "You are terse."}, *prompt], "on")
    assert kept[0]["content"] == "detailed thinking on\nYou are terse."
    assert thinking_mode(prompt) is None and prompt == [{"role": "user", "content": "2+2?"}]


def test_length_penalty_by_hand():
    # lengths 100, 200, 300: λ = 0.5, 0, −0.5
    assert length_rewards([100, 200, 300], [True, True, True]) == [0.5, 0.0, -0.5]
    assert length_rewards([100, 200, 300], [False, False, False]) == [0.0, 0.0, -0.5]
    assert length_rewards([100, 150, 300], [True, False, False]) == [0.5, 0.0, -0.5]
    assert length_rewards([7, 7, 7], [True, False, True]) == [0.0, 0.0, 0.0]
    assert penalty_weight(10, 0.1, warmup_steps=10) == 0.0 and penalty_weight(11, 0.1, warmup_steps=10) == 0.1


@given(st.lists(st.tuples(st.integers(1, 5000), st.booleans()), min_size=1, max_size=16))
def test_length_penalty_matches_the_equation(group):
    lengths, correct = [g[0] for g in group], [g[1] for g in group]
    lo, hi = min(lengths), max(lengths)
    for (length, ok), got in zip(group, length_rewards(lengths, correct)):
        lam = 0.0 if hi == lo else 0.5 - (length - lo) / (hi - lo)
        assert got == pytest.approx(lam if ok else min(0.0, lam))
        assert -0.5 <= got <= 0.5


def test_repetition_and_incomplete_rules():
    loop = [5, 6, 7, 8] * 80
    assert is_repetitive(loop)
    assert is_repetitive([1, 2, 3] + [9] * 300)
    assert not is_repetitive(list(range(400)))
    assert not is_repetitive([1, 2, 1, 2, 3])
    assert is_truncated([1] * 100, 100) and not is_truncated([1] * 99, 100)
    assert not is_truncated([1] * 99 + [2], 100, stop_ids=frozenset({2}))  # EOS exactly at the limit
    assert is_incomplete(judge_error=True, truncated=False, repetitive=False)
    assert is_incomplete(judge_error=False, truncated=True, repetitive=False)
    assert not is_incomplete(judge_error=False, truncated=True, repetitive=True)
    assert not is_incomplete(judge_error=False, truncated=False, repetitive=False)


#: the regular expression the linear extractor replaced, kept as the reference it must equal
OLD_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+#-]*)[^\n]*\n(.*?)```", re.DOTALL)


@settings(max_examples=2000, deadline=None)
@given(
    st.lists(
        st.sampled_from(["`", "``", "```", "````", "\n", " ", "\t", "py", "python", "c++", "x", "#", "."]), max_size=16
    )
)
def test_fenced_blocks_equal_the_regular_expression(pieces):
    text = "".join(pieces)
    assert fenced_blocks(text) == OLD_FENCE.findall(text)


@pytest.mark.parametrize(
    "hostile", ["`" * 1_000_000, "```" + " " * 1_000_000, "```python\n" + "`" * 1_000_000, "```\n" * 250_000]
)
def test_code_extraction_is_linear_on_adversarial_text(hostile):
    """The old expression backtracked quadratically here (400 K backticks: ~90 s)."""
    start = time.perf_counter()
    extract_code(hostile)
    assert time.perf_counter() - start < 5.0


def test_code_extraction():
    response = "<think>```python\nprint(0)\n```</think>Here:\n```python\nprint(1)\n```\nand\n```cpp\nint main(){}\n```"
    assert extract_code(response) == ("int main(){}\n", "cpp")
    assert extract_code("```\nprint(2)\n```") == ("print(2)\n", "python")
    assert extract_code("no code") is None
    assert extract_code("```rust\nfn main(){}\n```") is None
