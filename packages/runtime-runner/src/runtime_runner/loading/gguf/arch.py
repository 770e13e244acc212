"""The decoder shape of a GGUF checkpoint, read from its metadata into the ArchConfig a config.json gives.

llama.cpp names the hyperparameters per architecture (`llama.block_count`, `qwen2.block_count`, ...);
the families served from GGUF are the Llama-family ones the decoder runs: llama, qwen2 and qwen3.
"""

from __future__ import annotations

from types import MappingProxyType

from runtime_runner.errors import UnsupportedConfigError
from runtime_runner.loading.arch_config import ArchConfig, RopeSpec
from runtime_runner.loading.gguf.file import GgufFile
from runtime_runner.loading.tensor_names import LM_HEAD, layer_prefix

# llama.cpp's architecture name -> the entry class's architecture (config.json's architectures[0]).
GGUF_ARCHITECTURES: MappingProxyType[str, str] = MappingProxyType(
    {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
)
# llama.cpp's converter interleaves the rotary halves of each Q and K head of these (its rotary
# layout pairs adjacent features), so the loader puts each head's rows back in halves.
PERMUTED_QK = frozenset({"llama"})


def architecture_of(file: GgufFile) -> str:
    """The entry class's architecture of the file; UnsupportedConfigError naming the file's
    architecture and those accepted for any other."""
    served = GGUF_ARCHITECTURES.get(file.architecture)
    if served is None:
        raise UnsupportedConfigError(
            f"{file.path.name}: GGUF architecture {file.architecture!r} is not served from GGUF; "
            f"accepted: {', '.join(GGUF_ARCHITECTURES)} (or its Hugging Face checkpoint directory)"
        )
    return served


def gguf_arch_config(file: GgufFile) -> ArchConfig:
    """ArchConfig of the file's `{arch}.*` metadata; tied embeddings when it holds no output.weight,
    EOS from tokenizer.ggml.eos_token_id; a rope scaling or a partial rotary is refused."""
    architecture = architecture_of(file)
    hidden, heads = int(file.required("{arch}.embedding_length")), int(file.required("{arch}.attention.head_count"))
    head_dim = int(file.field("{arch}.attention.key_length") or hidden // heads)
    rotary = file.field("{arch}.rope.dimension_count")
    if rotary is not None and int(rotary) != head_dim:
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
    vocab = file.field("{arch}.vocab_size") or (embedding.shape[0] if embedding is not None else None)
    tokens = file.field("tokenizer.ggml.tokens")
    eos = file.field("tokenizer.ggml.eos_token_id")
    q_bias = f"{layer_prefix(0)}self_attn.q_proj.bias" in file.tensors
    return ArchConfig(
        architecture=architecture,
        vocab_size=int(vocab if vocab is not None else len(tokens or ())),
        hidden_size=hidden,
        intermediate_size=int(file.required("{arch}.feed_forward_length")),
        num_layers=int(file.required("{arch}.block_count")),
        num_heads=heads,
        num_kv_heads=int(file.field("{arch}.attention.head_count_kv") or heads),
        head_dim=head_dim,
        rms_norm_eps=float(file.required("{arch}.attention.layer_norm_rms_epsilon")),
        max_position_embeddings=int(file.required("{arch}.context_length")),
        rope=RopeSpec(theta=float(file.field("{arch}.rope.freq_base") or 10000.0), rope_type="default", params=()),
        tie_word_embeddings=LM_HEAD not in file.tensors,
        attention_bias=q_bias,
        mlp_bias=f"{layer_prefix(0)}mlp.gate_proj.bias" in file.tensors,
        # The blocks stand for fp32 values and the norms are stored fp32: served as an fp32 checkpoint is.
        checkpoint_dtype="float32",
        eos_token_ids=() if eos is None else (int(eos),),
    )
