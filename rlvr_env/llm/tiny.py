"""A tiny causal language model and a character-level tokenizer, built offline from a config.

For trying the TRL bridge on a CPU without downloading anything (tests and the README example use
it). It learns nothing useful in a few steps; a real run loads a pretrained model instead.
"""

from __future__ import annotations

import string
from typing import Any

__all__ = ["char_tokenizer", "tiny_model", "CHAT_TEMPLATE"]

#: A minimal chat template (role, then content, one message per line; generation opens an assistant turn).
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def char_tokenizer(chars: str = string.printable) -> Any:
    """A ``PreTrainedTokenizerFast`` with one token per character of ``chars`` plus ``<pad>``, ``<bos>``,
    ``<eos>`` and ``<unk>``, and :data:`CHAT_TEMPLATE` (so conversational prompts work)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<bos>", "<eos>", "<unk>"]
    vocab = {tok: i for i, tok in enumerate(specials)}
    for ch in dict.fromkeys(chars):  # keep order, drop repeats
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>",
                                   pad_token="<pad>", unk_token="<unk>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_model(vocab_size: int, *, layers: int = 2, width: int = 64, seed: int = 0,
               max_positions: int = 1024) -> Any:
    """A ``LlamaForCausalLM`` with ``layers`` layers of ``width`` units, randomly initialised under
    ``seed`` (about 0.1 M parameters with the defaults)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab_size, hidden_size=width, intermediate_size=2 * width,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=max_positions, pad_token_id=0, bos_token_id=1,
                         eos_token_id=2, tie_word_embeddings=True)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)
