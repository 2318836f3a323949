"""Test helper: run a model on a batch of sequences as verl's FSDP engine does, and return the
flat per-token log-probabilities verl hands its loss functions."""

from __future__ import annotations

import torch


def nested(rows) -> torch.Tensor:
    return torch.nested.as_nested_tensor(list(rows), layout=torch.jagged)


def engine_log_probs(model, sequences: list[torch.Tensor], packed: bool) -> torch.Tensor:
    """Padded: right padding + attention mask; packed: one row with restarting position ids (no
    cache, so transformers separates the packed sequences). Slot i scores token i+1 in verl's
    flat order (``torch.roll`` by -1 over the concatenation)."""
    lengths = [len(seq) for seq in sequences]
    if packed:
        logits = model(
            input_ids=torch.cat(sequences)[None],
            position_ids=torch.cat([torch.arange(n) for n in lengths])[None],
            use_cache=False,
        ).logits[0]
    else:
        padded = torch.nn.utils.rnn.pad_sequence(sequences, batch_first=True)
        attention = torch.nn.utils.rnn.pad_sequence(
            [torch.ones(n, dtype=torch.long) for n in lengths], batch_first=True
        )
        positions = torch.nn.utils.rnn.pad_sequence([torch.arange(n) for n in lengths], batch_first=True)
        full = model(input_ids=padded, attention_mask=attention, position_ids=positions, use_cache=False).logits
        logits = torch.cat([full[row, :n] for row, n in enumerate(lengths)])
    return torch.log_softmax(logits.float(), -1).gather(-1, torch.roll(torch.cat(sequences), shifts=-1)[:, None])[:, 0]
