"""A tiny random Llama checkpoint with a byte-level BPE tokenizer trained offline and a ChatML
chat template, built in about a second; fast enough to start a real server per test module."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_CORPUS = (
    "The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with a single step. "
    "To be or not to be, that is the question. All that glitters is not gold. Paris is the capital of France. "
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000. Héllo wörld, naïve café, 東京, 😀 emoji and ünïcödé text. "
)


def build_tokenizer(folder: Path, vocab_size: int = 384, added_tokens: Sequence[str] = ()) -> int:
    """Train a byte-level BPE on a small corpus and save it (tokenizer.json and config) in `folder`;
    the vocabulary size. `added_tokens` become single tokens after the trained ones (a test can
    then steer the model to one of them with logit_bias)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    transformers: Any = importlib.import_module("transformers")  # its stubs do not type these calls

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator([_CORPUS] * 20, trainer=trainer)
    tokenizer.add_tokens(list(added_tokens))
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=CHAT_TEMPLATE
    )
    fast.save_pretrained(folder)
    return int(tokenizer.get_vocab_size())


def build_tiny_checkpoint(
    folder: Path, *, max_position_embeddings: int = 4096, seed: int = 0, added_tokens: Sequence[str] = ()
) -> Path:
    """A 2-layer random Llama in float32 with the tokenizer above (and its `added_tokens`), saved
    in `folder`.

    Weights are drawn wide (initializer_range 0.5) so that the top logits are far apart and
    greedy decoding does not hinge on rounding differences between batch shapes.
    """
    import torch

    transformers: Any = importlib.import_module("transformers")

    folder.mkdir(parents=True, exist_ok=True)
    vocab = build_tokenizer(folder, added_tokens=added_tokens)
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_position_embeddings,
        initializer_range=0.5,
        tie_word_embeddings=False,
        eos_token_id=SPECIAL_TOKENS.index("<|im_end|>"),
        bos_token_id=None,
        dtype="float32",
    )
    model = transformers.LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(folder)
    return folder
