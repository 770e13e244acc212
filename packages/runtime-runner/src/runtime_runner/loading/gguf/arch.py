"""The decoder shape of a GGUF checkpoint, read from its metadata into the ArchConfig a config.json gives.

llama.cpp names the hyperparameters per architecture (`llama.block_count`, `qwen2.block_count`, ...);
the families served from GGUF are the Llama-family ones the decoder runs: llama, qwen2 and qwen3.
"""

from __future__ import annotations

from runtime_runner.errors import CheckpointError, UnsupportedConfigError
from runtime_runner.loading.arch_config import ArchConfig, RopeSpec
from runtime_runner.loading.gguf.file import GGUF_ARCHITECTURES, GgufFile
from runtime_runner.loading.tensor_names import LM_HEAD, layer_prefix

# llama.cpp's converter interleaves the rotary halves of each Q and K head of these (its rotary
# layout pairs adjacent features), so the loader puts each head's rows back in halves.
PERMUTED_QK = frozenset({"llama"})


def architecture_of(file: GgufFile) -> str:
    """The entry class's architecture of the file (GgufFile refused any other at opening)."""
    return GGUF_ARCHITECTURES[file.architecture]


def gguf_arch_config(file: GgufFile) -> ArchConfig:
    """ArchConfig of the file's `{arch}.*` metadata; tied embeddings when it holds no output.weight,
    EOS from tokenizer.ggml.eos_token_id; a rope scaling, a partial rotary or an odd head size is
    refused, and a count or size of the wrong type or below 1 is refused naming its key."""
    architecture = architecture_of(file)
    hidden, heads = file.integer("{arch}.embedding_length"), file.integer("{arch}.attention.head_count")
    kv_heads = file.optional_integer("{arch}.attention.head_count_kv") or heads
    if heads % kv_heads:
        raise CheckpointError(
            f"{file.path.name}: attention.head_count = {heads} is not a multiple of attention.head_count_kv = "
            f"{kv_heads}; accepted: query heads in whole groups per key/value head"
        )
    key_length = file.optional_integer("{arch}.attention.key_length")
    if key_length is None and hidden % heads:
        raise CheckpointError(
            f"{file.path.name}: embedding_length = {hidden} does not split into head_count = {heads} heads and "
            "the file states no attention.key_length; accepted: a whole head size, or the key_length stated"
        )
    head_dim = key_length or hidden // heads
    if head_dim % 2:
        raise CheckpointError(
            f"{file.path.name}: a head of {head_dim} features (attention.key_length, else embedding_length / "
            "head_count) does not split into the rotary pairs the decoder turns; accepted: an even head size"
        )
    rotary = file.optional_integer("{arch}.rope.dimension_count")
    if rotary is not None and rotary != head_dim:
        raise UnsupportedConfigError(
            f"{file.path.name}: rope.dimension_count = {rotary} rotates part of a {head_dim}-wide head; "
            "accepted: rotary over the whole head"
        )
    scaling = file.field("{arch}.rope.scaling.type")
    if scaling not in (None, "none"):
        raise UnsupportedConfigError(
            f"{file.path.name}: rope.scaling.type = {scaling!r} is not served from GGUF; accepted: none"
        )
    embedding = file.tensors.get("model.embed_tokens.weight")
    vocab = file.optional_integer("{arch}.vocab_size") or (
        embedding.shape[0] if embedding is not None else file.array_length("tokenizer.ggml.tokens") or 0
    )
    eos = file.optional_integer("tokenizer.ggml.eos_token_id", least=0)
    q_bias = f"{layer_prefix(0)}self_attn.q_proj.bias" in file.tensors
    return ArchConfig(
        architecture=architecture,
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=file.integer("{arch}.feed_forward_length"),
        num_layers=file.integer("{arch}.block_count"),
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        rms_norm_eps=file.real("{arch}.attention.layer_norm_rms_epsilon"),
        max_position_embeddings=file.integer("{arch}.context_length"),
        rope=RopeSpec(theta=file.optional_real("{arch}.rope.freq_base") or 10000.0, rope_type="default", params=()),
        tie_word_embeddings=LM_HEAD not in file.tensors,
        attention_bias=q_bias,
        mlp_bias=f"{layer_prefix(0)}mlp.gate_proj.bias" in file.tensors,
        # The blocks stand for fp32 values and the norms are stored fp32: served as an fp32 checkpoint is.
        checkpoint_dtype="float32",
        eos_token_ids=() if eos is None else (eos,),
    )
