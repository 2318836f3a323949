"""verl adapter: Llama-Nemotron's reasoning toggle in verl's prompt data path (Llama-Nemotron §4).
Selected with ``data.custom_cls`` (verl's extension point for dataset classes; the
option ``+reasonrl/rewards=nemotron`` sets it).

:class:`ThinkingToggleDataset` is verl's ``RLHFDataset`` whose prompts get the "detailed thinking
on/off" system message (``thinking_format.with_thinking_prompt``) from each row's
``extra_info.thinking`` ("on"/"off"/true/false); rows without it are left as they are. The reward
manager reads the same field for the format reward, so prompt and reward agree by construction.
verl's overlong-prompt filter measures the prompt before the toggle is added (at most 5 tokens
more in a real tokenizer).
"""

from __future__ import annotations

from verl.utils.dataset.rl_dataset import RLHFDataset

from reasonrl.plugins.rewards.thinking_format import with_thinking_prompt

TOGGLES = ("on", "off", True, False)


class ThinkingToggleDataset(RLHFDataset):
    def __getitem__(self, item):
        row = super().__getitem__(item)
        mode = (row.get("extra_info") or {}).get("thinking")
        if mode in TOGGLES:
            row["raw_prompt"] = with_thinking_prompt(row["raw_prompt"], mode)
        return row
