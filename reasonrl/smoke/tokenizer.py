"""A character-level tokenizer for the arithmetic task, built with ``tokenizers``.

It is a byte-level BPE tokenizer with no merges and one token per character, i.e. a real
Qwen2-style tokenizer with a tiny vocabulary. That matters: for ``model_type: qwen2``
transformers 5 always loads ``Qwen2Tokenizer`` (byte-level pre-tokenizer) whatever
``tokenizer_config.json`` says, so verl and vLLM tokenize with that class; the vocabulary
is stored in its byte-level alphabet ("Ġ" for a space, "Ċ" for a newline) so both agree
with :func:`build_tokenizer` (tested).
"""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

# The end-of-turn token is Qwen's ChatML one, and "\n" is a single token: verl's rollout
# (its Qwen continuous-token builder, chosen by config.json model_type "qwen2") needs both.
EOS_TOKEN = "<|im_end|>"
SPECIAL_TOKENS = ["<pad>", "<bos>", EOS_TOKEN, "<unk>"]
# Digits and operators (arithmetic), lower-case letters, think tags and code fences: the
# recipes' own task formats (``reasonrl.smoke.arithmetic``: thinking toggle, one-line programs).
CHARACTERS = list("0123456789+-=*? \n") + list("abcdefghijklmnopqrstuvwxyz") + list("<>/`()")
# Chat template: the messages' texts in order, a system message on its own line; generation
# continues right after the user's text.
CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% if message['role'] == 'system' %}{{ '\\n' }}{% endif %}{% endfor %}"


def _byte_level(character: str) -> str:
    """The byte-level alphabet's spelling of one ASCII character."""
    ((piece, _span),) = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False).pre_tokenize_str(character)
    return piece


#: Token strings in id order: the special tokens, then one per character.
VOCABULARY = SPECIAL_TOKENS + [_byte_level(c) for c in CHARACTERS]


def build_tokenizer() -> PreTrainedTokenizerFast:
    """Deterministic: the vocabulary is the fixed list above, in order."""
    vocab = {token: index for index, token in enumerate(VOCABULARY)}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", bos_token="<bos>", eos_token=EOS_TOKEN, unk_token="<unk>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.padding_side = "left"
    return tokenizer
