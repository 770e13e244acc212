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

from runtime_runner.errors import UnsupportedConfigError
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
    """The byte-level BPE tokenizer of the GGUF file at `path`; refuses any other tokenizer kind."""
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
    architecture = field(gguf.Keys.General.ARCHITECTURE)
    return GgufTokenizer(
        pre=pre,
        tokens=tuple(field(keys.LIST)),
        token_types=tuple(field(keys.TOKEN_TYPE)),
        merges=tuple(field(keys.MERGES)),
        bos_id=field(keys.BOS_ID),
        eos_id=field(keys.EOS_ID),
        unk_id=field(keys.UNK_ID),
        pad_id=field(keys.PAD_ID),
        add_bos=field(keys.ADD_BOS),
        chat_template=field(keys.CHAT_TEMPLATE),
        context_length=int(field(gguf.Keys.LLM.CONTEXT_LENGTH.format(arch=architecture))),
    )


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
