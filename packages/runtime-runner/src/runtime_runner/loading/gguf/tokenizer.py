"""A GGUF file's GPT-2-style (byte-level BPE) tokenizer, written as Hugging Face tokenizer files.

transformers' GGUF tokenizer conversion sends a Llama-architecture file through its sentencepiece
converter whatever the file's `tokenizer.ggml.model` says: for a byte-level BPE it writes
`byte_fallback: true`, wraps the ByteLevel decoder in sentencepiece steps, and names the BOS token
as the EOS as well. Tools that classify a tokenizer by those fields (llama.cpp's gguf vocab loaders)
then take it for a sentencepiece vocabulary, and generation stops on the wrong token. Here the
tokenizer is built from the file's own metadata instead, the way a GPT-2-style tokenizer is laid out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

from runtime_runner.errors import CheckpointError, UnsupportedConfigError
from runtime_runner.loading.gguf.format import read_gguf_layout


def _gpt2_split() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)


def _digits_then_gpt2_split() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), _gpt2_split()])


# llama.cpp's pre-tokenizer types (`tokenizer.ggml.pre`), as Hugging Face pre-tokenizers: "gpt2" is
# GPT-2's regex; "smollm" splits every digit off first, then applies GPT-2's regex.
PRE_TOKENIZERS = {"gpt2": _gpt2_split, "smollm": _digits_then_gpt2_split}


@dataclass(frozen=True)
class GgufTokenizer:
    """The tokenizer a GGUF file's `tokenizer.ggml.*` metadata declares."""

    pre: str
    tokens: tuple[str, ...]
    token_types: tuple[int, ...]
    merges: tuple[str, ...]
    bos_id: int | None
    eos_id: int | None
    unk_id: int | None
    pad_id: int | None
    add_bos: bool | None
    chat_template: str | None
    context_length: int

    def token(self, token_id: int | None) -> str | None:
        """The token text of `token_id` (None for None)."""
        return None if token_id is None else self.tokens[token_id]


def read_gguf_tokenizer(path: Path) -> GgufTokenizer:
    """The byte-level BPE tokenizer of the GGUF file at `path`; refuses any other tokenizer kind, and
    (CheckpointError naming the key) a vocabulary, token types, merges or special ids that do not fit
    together."""
    metadata = read_gguf_layout(path, strings=True).metadata

    def field(key: str) -> Any:
        return metadata.get(key)

    keys = gguf.Keys.Tokenizer
    kind = field(keys.MODEL)
    if kind != "gpt2":
        raise UnsupportedConfigError(
            f"{path.name}: {keys.MODEL} = {kind!r} is not supported; accepted: 'gpt2' (byte-level BPE)"
        )
    pre = field(keys.PRE)
    if pre not in PRE_TOKENIZERS:
        raise UnsupportedConfigError(
            f"{path.name}: {keys.PRE} = {pre!r} is not supported; accepted: {sorted(PRE_TOKENIZERS)}"
        )
    tokens = _array_of(path, keys.LIST, field(keys.LIST), str)
    token_types = _array_of(path, keys.TOKEN_TYPE, field(keys.TOKEN_TYPE), int)
    if not tokens or len(token_types) != len(tokens):
        raise CheckpointError(
            f"{path.name}: {keys.LIST} holds {len(tokens)} tokens and {keys.TOKEN_TYPE} {len(token_types)} types; "
            "accepted: one type per token, at least one token"
        )
    merges = _array_of(path, keys.MERGES, field(keys.MERGES), str)
    malformed = next((merge for merge in merges if len(merge.split(" ")) != 2 or "" in merge.split(" ")), None)
    if malformed is not None:
        raise CheckpointError(
            f"{path.name}: {keys.MERGES} holds {malformed[:40]!r}; accepted: merges of two tokens joined by one space"
        )
    ids = {key: _token_id(path, key, field(key), len(tokens)) for key in (keys.BOS_ID, keys.EOS_ID, keys.UNK_ID)}
    architecture = field(gguf.Keys.General.ARCHITECTURE)
    context_key = gguf.Keys.LLM.CONTEXT_LENGTH.format(arch=architecture)
    context_length = field(context_key)
    if isinstance(context_length, bool) or not isinstance(context_length, int) or context_length < 1:
        raise CheckpointError(f"{path.name}: {context_key} = {context_length!r}; accepted: an integer of at least 1")
    add_bos = field(keys.ADD_BOS)
    chat_template = field(keys.CHAT_TEMPLATE)
    return GgufTokenizer(
        pre=pre,
        tokens=tokens,
        token_types=token_types,
        merges=merges,
        bos_id=ids[keys.BOS_ID],
        eos_id=ids[keys.EOS_ID],
        unk_id=ids[keys.UNK_ID],
        pad_id=_token_id(path, keys.PAD_ID, field(keys.PAD_ID), len(tokens)),
        add_bos=add_bos if isinstance(add_bos, bool) else None,
        chat_template=chat_template if isinstance(chat_template, str) else None,
        context_length=context_length,
    )


def _array_of(path: Path, key: str, value: Any, element: type) -> tuple[Any, ...]:
    """`value` as a tuple of `element`s (an absent array is empty); CheckpointError naming `key` otherwise."""
    if value is None:
        return ()
    if not isinstance(value, tuple) or not all(isinstance(v, element) and not isinstance(v, bool) for v in value):
        raise CheckpointError(
            f"{path.name}: {key} is {type(value).__name__}; accepted: an array of {element.__name__} "
            "(the file is corrupt, or was written by another tool)"
        )
    return value


def _token_id(path: Path, key: str, value: Any, vocabulary: int) -> int | None:
    """A special token's id, None when absent; CheckpointError naming `key` for one past the vocabulary."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < vocabulary:
        raise CheckpointError(
            f"{path.name}: {key} = {value!r}; accepted: a token id below the vocabulary's {vocabulary} tokens"
        )
    return value


def byte_level_bpe(spec: GgufTokenizer) -> Tokenizer:
    """The `tokenizers` pipeline of `spec`: no normalizer, ByteLevel pre-tokenizer and decoder, a
    BPE without byte fallback or unknown token (every byte has a token), control tokens special."""
    bpe = models.BPE(
        {token: index for index, token in enumerate(spec.tokens)},
        [(left, right) for left, right in (merge.split(" ") for merge in spec.merges)],
        byte_fallback=False,
        fuse_unk=False,
    )
    tokenizer = Tokenizer(bpe)
    tokenizer.pre_tokenizer = PRE_TOKENIZERS[spec.pre]()
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.add_special_tokens(_tokens_of_type(spec, gguf.TokenType.CONTROL, special=True))
    tokenizer.add_tokens(_tokens_of_type(spec, gguf.TokenType.USER_DEFINED, special=False))
    return tokenizer


def _tokens_of_type(spec: GgufTokenizer, kind: gguf.TokenType, *, special: bool) -> list[AddedToken]:
    """The tokens of one GGUF token type, as added tokens matched before the BPE runs."""
    return [
        AddedToken(spec.tokens[i], special=special, normalized=False)
        for i, t in enumerate(spec.token_types)
        if t == kind
    ]


def tokenizer_config(spec: GgufTokenizer) -> dict[str, Any]:
    """`tokenizer_config.json` for `spec`: the special tokens the GGUF metadata names, and no
    decode-time space clean-up (it would alter a byte-level BPE's exact text)."""
    named = {"bos_token": spec.bos_id, "eos_token": spec.eos_id, "unk_token": spec.unk_id, "pad_token": spec.pad_id}
    config: dict[str, Any] = {
        # transformers 4 and 5 both know this class (5 aliases it to TokenizersBackend) and both load
        # tokenizer.json as written; a model class such as GPT2Tokenizer would rebuild the pipeline.
        "tokenizer_class": "PreTrainedTokenizerFast",
        **{name: spec.token(token_id) for name, token_id in named.items() if token_id is not None},
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": spec.context_length,
    }
    if spec.add_bos is not None:
        config["add_bos_token"] = spec.add_bos
    if spec.chat_template is not None:
        config["chat_template"] = spec.chat_template
    return config


def write_hf_tokenizer(gguf_file: Path, target: Path) -> None:
    """Write `tokenizer.json` and `tokenizer_config.json` for the GGUF file's tokenizer into `target`."""
    spec = read_gguf_tokenizer(gguf_file)
    target.mkdir(parents=True, exist_ok=True)
    byte_level_bpe(spec).save(str(target / "tokenizer.json"))
    (target / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config(spec), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
