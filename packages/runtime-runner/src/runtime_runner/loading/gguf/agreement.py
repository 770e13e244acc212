"""A GGUF file's metadata held against its own tensors before either is trusted: the decoder shape
the `{arch}.*` hyperparameters state (gguf.arch) must be the shape of every tensor the file holds,
layer for layer, and the tokenizer's vocabulary and special tokens must fit in the embedding.

A file whose header lies (a block_count past the layers it holds, an embedding_length its matrices
do not have) is refused here, at resolution, in one line naming the tensor and the keys, rather
than failing inside a loading child process.
"""

from __future__ import annotations

from runtime_runner.errors import CheckpointError
from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.loading.checkpoint_layout import WeightLayout, layout_tensors
from runtime_runner.loading.gguf.file import BLOCK_TYPES, GgufFile
from runtime_runner.loading.gguf.names import gguf_name_of
from runtime_runner.loading.tensor_names import layer_prefix


def _stated(cfg: ArchConfig) -> str:
    """The hyperparameters the shapes follow from, as the file's keys name them."""
    return (
        f"block_count = {cfg.num_layers}, embedding_length = {cfg.hidden_size}, head_count = {cfg.num_heads}, "
        f"head_count_kv = {cfg.num_kv_heads}, head size {cfg.head_dim}, feed_forward_length = "
        f"{cfg.intermediate_size}, vocabulary {cfg.vocab_size}"
    )


def refuse_disagreeing_tensors(file: GgufFile, cfg: ArchConfig) -> None:
    """CheckpointError unless the file holds exactly the tensors `cfg` (its own metadata) implies,
    each of the implied shape (a vector in F32, F16 or BF16), its tokenizer's tokens fit in the
    vocabulary and its EOS is a token."""
    held = file.tensors
    layer0 = layer_prefix(0)
    layout = WeightLayout(
        qkv_bias=f"{layer0}self_attn.q_proj.bias" in held,
        o_bias=f"{layer0}self_attn.o_proj.bias" in held,
        mlp_bias=f"{layer0}mlp.gate_proj.bias" in held,
        qk_norm=f"{layer0}self_attn.q_norm.weight" in held,
    )
    expected = {spec.name: spec.shape for spec in layout_tensors(cfg, layout, cfg.tie_word_embeddings)}
    name = file.path.name
    for hf_name, tensor in held.items():
        shape = expected.get(hf_name)
        if shape is None:
            raise CheckpointError(
                f"{name}: tensor {tensor.name} has no place in the decoder its metadata states ({_stated(cfg)}, "
                "layer 0's biases and norms for every layer); the header or the tensor table is wrong"
            )
        if tensor.shape != shape:
            raise CheckpointError(
                f"{name}: tensor {tensor.name} has shape {list(tensor.shape)}, but its metadata ({_stated(cfg)}) "
                f"implies {list(shape)}; the header or the tensor table is wrong"
            )
        if len(shape) == 1 and tensor.tensor_type in BLOCK_TYPES:
            raise CheckpointError(
                f"{name}: tensor {tensor.name} is {tensor.tensor_type.name}, a block type the kernels serve for "
                "matrices, but it is a vector (a norm or a bias); accepted: F32, F16 or BF16 for it"
            )
    missing = [hf_name for hf_name in expected if hf_name not in held]
    if missing:
        raise CheckpointError(
            f"{name} lacks tensor {gguf_name_of(missing[0])}"
            f"{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''} of the decoder its metadata states "
            f"({_stated(cfg)}); the header or the tensor table is wrong"
        )
    tokens = file.array_length("tokenizer.ggml.tokens")
    if tokens is not None and tokens > cfg.vocab_size:
        raise CheckpointError(
            f"{name}: its tokenizer holds {tokens} tokens, more than the {cfg.vocab_size} rows of its "
            "embedding; accepted: a vocabulary the embedding covers"
        )
    for eos in cfg.eos_token_ids:
        if eos >= cfg.vocab_size:
            raise CheckpointError(
                f"{name}: tokenizer.ggml.eos_token_id = {eos} is past its vocabulary of {cfg.vocab_size}; accepted: "
                "a token id the embedding has a row for"
            )
