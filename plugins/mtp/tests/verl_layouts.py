"""Test helper: run a model on a batch of sequences as verl's FSDP engine does, and build the
``model_output`` verl hands its loss functions: flat per-token log-probabilities and, for the
MTP engine (``verl_engine.nested_token_losses``, the engine's own code), the per-depth MTP losses."""

from __future__ import annotations

import torch


def nested(rows) -> torch.Tensor:
    return torch.nested.as_nested_tensor(list(rows), layout=torch.jagged)


def engine_model_output(model, sequences: list[torch.Tensor], data, packed: bool, mtp_loss_depths: int = 0) -> dict:
    """``model_output`` for the micro-batch ``data`` (verl's nested ``input_ids`` of ``sequences``)."""
    from reasonrl.plugins.mtp.verl_engine import nested_token_losses

    log_probs, output = engine_forward(model, sequences, packed, mtp_loss_depths)
    model_output = {"log_probs": nested(log_probs.split([len(seq) for seq in sequences]))}
    if mtp_loss_depths:
        model_output.update(nested_token_losses(output, data))
    return model_output


def engine_forward(model, sequences: list[torch.Tensor], packed: bool, mtp_loss_depths: int = 0):
    """Padded: right padding + attention mask; packed: one row with restarting position ids (no
    cache, so transformers separates the packed sequences). Slot i scores token i+1 in verl's
    flat order (``torch.roll`` by -1 over the concatenation). Returns (log-probs, the model's output)."""
    lengths = [len(seq) for seq in sequences]
    extra = {"mtp_loss_depths": mtp_loss_depths} if mtp_loss_depths else {}
    if packed:
        output = model(
            input_ids=torch.cat(sequences)[None],
            position_ids=torch.cat([torch.arange(n) for n in lengths])[None],
            use_cache=False,
            **extra,
        )
        logits = output.logits[0]
    else:
        padded = torch.nn.utils.rnn.pad_sequence(sequences, batch_first=True)
        attention = torch.nn.utils.rnn.pad_sequence(
            [torch.ones(n, dtype=torch.long) for n in lengths], batch_first=True
        )
        positions = torch.nn.utils.rnn.pad_sequence([torch.arange(n) for n in lengths], batch_first=True)
        output = model(input_ids=padded, attention_mask=attention, position_ids=positions, use_cache=False, **extra)
        logits = torch.cat([output.logits[row, :n] for row, n in enumerate(lengths)])
    targets = torch.roll(torch.cat(sequences), shifts=-1)[:, None]
    return torch.log_softmax(logits.float(), -1).gather(-1, targets)[:, 0], output
