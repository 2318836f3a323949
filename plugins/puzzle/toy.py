"""A tiny Llama parent for CPU runs and tests, trained briefly on a synthetic language so that
quality costs mean something: a fixed random order-2 Markov chain over 24 symbols whose
next-symbol distributions are sparse (Dirichlet 0.1). The parent must store the 576-context
transition table in its weights and find the previous two symbols with attention, so removing
capacity measurably costs held-out loss; the language's own entropy is the loss floor.

Width 1024 in the FFN makes the 100/75/50/25 % menu land on multiples of 256 (what the
exported ``block_configs`` can express); hidden 128, 4 heads of 32, 4 KV heads.
"""

from __future__ import annotations

import functools

import torch

from reasonrl.plugins.puzzle.compat import set_attention_implementation

SYMBOLS = 24
VOCAB = SYMBOLS + 3  # + pad (0), bos (1), eos (2)
CHAIN_SEED = 1234


@functools.lru_cache(maxsize=None)
def transition_table(seed: int = CHAIN_SEED) -> torch.Tensor:
    """P(next | previous two) for every pair of symbols: SYMBOLS² × SYMBOLS, sparse rows.
    Computed once per seed (read-only); torch's Gamma sampler takes no generator, so it runs
    on the global one, seeded inside ``fork_rng`` and left as the caller had it."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        weights = (
            torch.distributions.Gamma(torch.full((SYMBOLS * SYMBOLS, SYMBOLS), 0.1), torch.ones(1)).sample() + 1e-6
        )
    return weights / weights.sum(-1, keepdim=True)


def entropy_floor() -> float:
    """The language's mean next-symbol entropy (nats): the best achievable LM loss."""
    table = transition_table()
    return float(-(table * table.log()).sum(-1).mean())


def corpus(sequences: int, length: int, seed: int) -> torch.Tensor:
    """``sequences`` × ``length`` token ids sampled from the chain (bos first)."""
    table = transition_table()
    generator = torch.Generator().manual_seed(seed)
    rows = torch.empty(sequences, length, dtype=torch.long)
    rows[:, 0] = 1
    state = torch.randint(0, SYMBOLS, (sequences, 2), generator=generator)
    rows[:, 1:3] = state + 3
    for position in range(3, length):
        probabilities = table[state[:, 0] * SYMBOLS + state[:, 1]]
        nxt = torch.multinomial(probabilities, 1, generator=generator).squeeze(1)
        rows[:, position] = nxt + 3
        state = torch.stack([state[:, 1], nxt], dim=1)
    return rows


def parent_config(layers: int = 6):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=128,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=1024,
        num_hidden_layers=layers,
        max_position_embeddings=256,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )


def train_parent(steps: int = 300, layers: int = 6, seed: int = 0, batch: int = 32, length: int = 64, log=print):
    """A LlamaForCausalLM trained ``steps`` AdamW steps on the addition language."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    config = parent_config(layers)
    set_attention_implementation(config, "sdpa")
    model = LlamaForCausalLM(config)
    data = corpus(steps * batch, length, seed)  # fresh sequences every step: no memorised corpus
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    model.train()
    for step in range(steps):
        rows = torch.arange(step * batch, (step + 1) * batch)
        loss = model(input_ids=data[rows], labels=data[rows]).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if log and (step + 1) % max(1, steps // 5) == 0:
            log(f"toy parent step {step + 1}/{steps}  lm loss {loss.item():.3f} (floor {entropy_floor():.3f})")
    return model.eval()
