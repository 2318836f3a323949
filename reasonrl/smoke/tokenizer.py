"""A character-level tokenizer for the arithmetic task, built with ``tokenizers``."""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ["<pad>", "<bos>", "<eos>", "<unk>"]
CHARACTERS = list("0123456789+-=*? ")
# Chat template: the user's text is the whole prompt; generation continues right after it.
CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"


def build_tokenizer() -> PreTrainedTokenizerFast:
    """Deterministic: the vocabulary is the fixed list above, in order."""
    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS + CHARACTERS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    core.post_processor = processors.TemplateProcessing(single="$A", special_tokens=[])
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>", unk_token="<unk>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.padding_side = "left"
    return tokenizer
