"""Training with MTP, layer replication and per-layer acceptance (MiMo §2.2, §2.3 "MTP layers
in inference").

* ``train``: L_main + λ(step) · mean_k L^k with MiMo's schedule (``core.WeightSchedule``), the
  main model and any MTP layer frozen on request; logs the loss of each depth.
* ``replicate``: MiMo trains one MTP layer in pre-training, then copies it into k layers and
  fine-tunes layers 2..k with the main model and layer 1 frozen (layer k drafts token i+k+1).
* ``acceptance``: teacher-forced per-layer acceptance on held-out sequences — layer k is
  "accepted" at position i when its greedy token equals t_{i+k+1}; the chained figure also needs
  every earlier layer accepted (what speculative decoding sees).
"""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass
from pathlib import Path

import torch

from reasonrl.plugins.mtp.core import WeightSchedule, total_loss


@dataclass
class TrainLog:
    step: int
    weight: float
    main_loss: float
    depth_losses: list[float]

    def line(self) -> str:
        depths = " ".join(f"L{k}={loss:.3f}" for k, loss in enumerate(self.depth_losses, start=1))
        return f"step {self.step}: λ={self.weight:g} main={self.main_loss:.3f} {depths}"


def batches(sequences: list[list[int]], batch_size: int, seed: int):
    """Endless shuffled batches of equal-length sequences (right-padded with a mask otherwise)."""
    rng = random.Random(seed)
    order = list(range(len(sequences)))
    while True:
        rng.shuffle(order)
        for start in range(0, len(order) - batch_size + 1, batch_size):
            yield pad([sequences[index] for index in order[start : start + batch_size]])


def pad(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(row) for row in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for index, row in enumerate(rows):
        ids[index, : len(row)] = torch.tensor(row)
        mask[index, : len(row)] = 1
    return ids, mask


def train(
    model,
    sequences: list[list[int]],
    steps: int,
    *,
    schedule: WeightSchedule = WeightSchedule(),
    lr: float = 3e-3,
    batch_size: int = 32,
    train_main: bool = True,
    train_depths: tuple[int, ...] | None = None,
    main_in_loss: bool = True,
    seed: int = 0,
    log_every: int = 50,
    log=print,
) -> list[TrainLog]:
    """Adam on the chosen parameters; ``train_depths`` (1-based) are the MTP layers that learn
    (default: all); frozen parts get ``requires_grad = False``."""
    layers = model.model.mtp_layers
    learning = set(range(1, len(layers) + 1) if train_depths is None else train_depths)
    for parameter in model.parameters():
        parameter.requires_grad_(train_main)
    for depth, layer in enumerate(layers, start=1):
        for parameter in layer.parameters():
            parameter.requires_grad_(depth in learning)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    model.train()
    logs, stream = [], batches(sequences, batch_size, seed)
    for step in range(1, steps + 1):
        ids, mask = next(stream)
        out = model.mtp_outputs(ids, attention_mask=mask)
        weight = schedule.at(step)
        losses = [loss for depth, loss in enumerate(out.mtp.losses, start=1) if depth in learning] or out.mtp.losses
        loss = total_loss(out.main_loss, losses, weight) if main_in_loss else torch.stack(losses).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % log_every == 0 or step == steps:
            entry = TrainLog(step, weight, out.main_loss.item(), [value.item() for value in out.mtp.losses])
            logs.append(entry)
            log(entry.line())
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    return logs


def replicate(model, num_layers: int):
    """Copy MTP layer 1 into layers 1..num_layers (in place; ``num_nextn_predict_layers`` updated)."""
    layers = model.model.mtp_layers
    if len(layers) < 1:
        raise ValueError("the checkpoint has no MTP layer to replicate (num_nextn_predict_layers = 0)")
    if num_layers < 1:
        raise ValueError(f"layers must be >= 1, got {num_layers}")
    first = layers[0]
    model.model.mtp_layers = torch.nn.ModuleList([first] + [copy.deepcopy(first) for _ in range(num_layers - 1)])
    model.config.num_nextn_predict_layers = num_layers
    return model


@torch.no_grad()
def acceptance(
    model, sequences: list[list[int]], prompt_length: int = 0, batch_size: int = 64
) -> dict[str, list[float]]:
    """Per-layer teacher-forced acceptance on ``sequences`` (positions from ``prompt_length`` on):
    ``independent[k-1]`` = P(layer k's greedy token = t_{i+k+1}); ``chained[k-1]`` also requires
    layers 1..k-1 (and the main model's next token) to be right — the rate a k-token draft
    reaches position k; ``sampled[k-1]`` = the mean probability the main model gives layer k's
    greedy token, i.e. the rate at which a verifier sampling at temperature 1 accepts it (vLLM's
    rejection sampler with greedy drafts)."""
    model.eval()
    depth = len(model.model.mtp_layers)
    hits = torch.zeros(depth)
    chain_hits = torch.zeros(depth)
    sampled = torch.zeros(depth)
    counted = torch.zeros(depth)
    for start in range(0, len(sequences), batch_size):
        ids, mask = pad(sequences[start : start + batch_size])
        out = model.mtp_outputs(ids, attention_mask=mask)
        length = ids.shape[1]
        positions = torch.arange(length)
        main_right = torch.zeros_like(ids, dtype=torch.bool)
        main_right[:, :-1] = out.main_logits[:, :-1].argmax(-1) == ids[:, 1:]
        chain = main_right.clone()
        for k, logits in enumerate(out.mtp.logits, start=1):
            target = torch.roll(ids, shifts=-(k + 1), dims=1)
            valid = (positions < length - k - 1) & (positions >= prompt_length)
            valid = valid & torch.roll(mask.bool(), shifts=-(k + 1), dims=1)
            draft = logits.argmax(-1)
            right = (draft == target) & valid
            chain = chain & right
            # the main model's distribution for t_{i+k+1} sits at position i+k
            verifier = torch.roll(out.main_logits.float().softmax(-1), shifts=-k, dims=1)
            sampled[k - 1] += (verifier.gather(-1, draft.unsqueeze(-1)).squeeze(-1) * valid).sum()
            hits[k - 1] += right.sum()
            chain_hits[k - 1] += (chain & valid).sum()
            counted[k - 1] += valid.sum()
    return {
        "independent": (hits / counted.clamp_min(1)).tolist(),
        "chained": (chain_hits / counted.clamp_min(1)).tolist(),
        "sampled": (sampled / counted.clamp_min(1)).tolist(),
    }


def read_sequences(path: Path, tokenizer=None) -> list[list[int]]:
    """JSONL rows with ``input_ids`` (token ids) or ``text`` (needs the checkpoint's tokenizer)."""
    sequences = []
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if "input_ids" in row:
            sequences.append([int(token) for token in row["input_ids"]])
        elif "text" in row and tokenizer is not None:
            sequences.append(tokenizer(row["text"])["input_ids"])
        else:
            raise ValueError(f"{path}: each row needs 'input_ids' (or 'text' with a tokenizer in the checkpoint)")
    return sequences


@torch.no_grad()
def simulate_drafting(model, prompts: list[list[int]], outputs: list[list[int]], k: int) -> tuple[int, list[int]]:
    """Greedy speculative decoding replayed from the equations (full recompute, no KV cache): at
    each round, layer j drafts token P+j+1 from depth j-1's state and draft j-1; drafts are accepted
    while they match the target's greedy ``outputs``. Returns (rounds, accepted count per position)
    — the figures vLLM reports as ``spec_decode_num_drafts`` / ``..._accepted_tokens_per_pos``."""
    rounds, accepted = 0, [0] * k
    for prompt, output in zip(prompts, outputs):
        sequence = prompt + output
        last = len(prompt) - 1  # position P of the last accepted token; t_{P+1} is the target's sample
        while last + 2 < len(sequence):
            drafts: list[int] = []
            for depth in range(1, k + 1):
                ids = torch.tensor([sequence[: last + 2] + drafts])
                out = model.mtp_outputs(ids, depths=depth)
                drafts.append(int(out.mtp.logits[depth - 1][0, last].argmax()))
            matched = 0
            while (
                matched < k and last + 2 + matched < len(sequence) and drafts[matched] == sequence[last + 2 + matched]
            ):
                matched += 1
            rounds += 1
            for position in range(matched):
                accepted[position] += 1
            last += matched + 1
    return rounds, accepted
