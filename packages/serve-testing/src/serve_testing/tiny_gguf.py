"""A tiny GGUF checkpoint written from a transformers model as llama.cpp's converter lays one out, and
its reference: the same weights de-quantized, saved as a Hugging Face checkpoint.

The tensor names come from gguf-py's own name map (llama.cpp's), not from the runner's, and a Llama
model's Q and K rows are interleaved per head as the converter does for its rotary layout, so a
reader that mis-maps or fails to undo the interleave reads other weights than the reference holds.
Matrices are quantized (serve_testing.gguf_quantizer) to one GGUF type or a mix named per tensor
(llama-quantize's Q4_K_M choices: serve_testing.llama_quantize_mix), K-quants where a row is not
whole super-blocks substituted as llama-quantize does; norms stay F32.

Quantizing works on blocks along a row, so interleaving rows commutes with it: the reference is each
matrix quantized and de-quantized in Hugging Face's row order.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import gguf
import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from serve_testing.gguf_quantizer import QUANTIZED_TYPES, SUPER, quantize_rows

# GGUF type name -> the type: dense, every block type serve_testing.gguf_quantizer writes, and
# MXFP4, one the runner does not serve (gguf-py quantizes it).
GGUF_TYPES = {
    t.name: t
    for t in (
        GGMLQuantizationType.F32,
        GGMLQuantizationType.F16,
        GGMLQuantizationType.BF16,
        *QUANTIZED_TYPES,
        GGMLQuantizationType.MXFP4,
    )
}
# llama-quantize's substitute for a K-quant where a row is not whole 256-value super-blocks (a
# Q4_K_M file of 576-wide rows is mostly Q5_0 and Q8_0 for it), F16 where the row is not whole
# blocks of the substitute either. (Its newest sources substitute Q4_0 for Q2_K and Q3_K.)
K_QUANT_SUBSTITUTES = MappingProxyType(
    {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0", "Q2_K": "IQ4_NL", "Q3_K": "IQ4_NL"}
)
_ARCHES = {"llama": gguf.MODEL_ARCH.LLAMA, "qwen2": gguf.MODEL_ARCH.QWEN2, "qwen3": gguf.MODEL_ARCH.QWEN3}


def interleaved_rotary_rows(weight: np.ndarray, heads: int) -> np.ndarray:
    """`weight`'s rows (or a bias's values) per head from Hugging Face's halves [h, half, j] to
    llama.cpp's interleave [h, j, half]."""
    per_half = weight.shape[0] // heads // 2
    return weight.reshape(heads, 2, per_half, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def _stored(values: np.ndarray, kind: GGMLQuantizationType) -> np.ndarray:
    """`values` (fp32) as the file stores them in `kind`: its blocks, or F16/F32 numbers."""
    if kind == GGMLQuantizationType.F32:
        return values
    if kind == GGMLQuantizationType.F16:
        return values.astype(np.float16)
    if kind in QUANTIZED_TYPES:
        return quantize_rows(values, kind)
    return np.asarray(gguf.quants.quantize(values, kind))  # BF16, MXFP4


def stored_type(name: str, row_length: int) -> str:
    """The type a matrix asked for as `name` (a GGUF_TYPES name) is stored in: itself, or for a K-quant
    whose rows of `row_length` are not whole super-blocks, llama-quantize's substitute (F16 where
    they are not whole blocks of the substitute either)."""
    if name not in K_QUANT_SUBSTITUTES or row_length % SUPER == 0:
        return name
    substitute = K_QUANT_SUBSTITUTES[name]
    return substitute if row_length % GGML_QUANT_SIZES[GGUF_TYPES[substitute]][0] == 0 else "F16"


def _read_back(stored: np.ndarray, kind: GGMLQuantizationType) -> np.ndarray:
    """The fp32 values `stored` stands for."""
    if kind in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
        return stored.astype(np.float32)
    return np.asarray(gguf.quants.dequantize(stored, kind), dtype=np.float32)


def write_tiny_gguf(
    model: Any, folder: Path, matrix_type: str, *, types: Mapping[str, str] = MappingProxyType({})
) -> tuple[Path, Path]:
    """Write `model` (a transformers Llama, Qwen2 or Qwen3 in fp32) as `folder/model.gguf` with its
    matrices in `matrix_type` (a GGUF_TYPES name), those whose Hugging Face name `types` holds in
    the type it names (a K-quant as its `stored_type`, as llama-quantize does), and its de-quantized
    reference as a Hugging Face checkpoint in `folder/reference`; answers (the GGUF file, the
    reference directory)."""
    config = model.config
    arch = config.model_type
    name_map = gguf.get_tensor_name_map(_ARCHES[arch], config.num_hidden_layers)
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.gguf"
    writer = gguf.GGUFWriter(path, arch)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(float(getattr(config, "rope_theta", None) or config.rope_parameters["rope_theta"]))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    reference: dict[str, torch.Tensor] = {}
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight" and config.tie_word_embeddings:
            continue
        values = tensor.detach().float().numpy()
        asked = types.get(name, matrix_type)
        kind = GGUF_TYPES[stored_type(asked, values.shape[1])] if values.ndim == 2 else GGMLQuantizationType.F32
        stored = _stored(values, kind)
        reference[name] = torch.from_numpy(_read_back(stored, kind).reshape(values.shape).copy())
        if arch == "llama" and (".q_proj." in name or ".k_proj." in name):
            stored = _stored(interleaved_rotary_rows(values, heads if ".q_proj." in name else kv_heads), kind)
        gguf_name = name_map.get_name(name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise ValueError(f"gguf-py has no name for {name} under {arch}")
        writer.add_tensor(gguf_name, stored, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    transformers: Any = importlib.import_module("transformers")
    # The file holds the norm epsilon as an fp32 number: the reference holds the same number.
    stored_config = type(config).from_dict({**config.to_dict(), "rms_norm_eps": float(np.float32(config.rms_norm_eps))})
    dequantized = getattr(transformers, type(model).__name__)(stored_config)
    dequantized.load_state_dict(reference, strict=not config.tie_word_embeddings)
    dequantized.save_pretrained(folder / "reference")
    return path, folder / "reference"


def rewritten_gguf(
    source: Path,
    target: Path,
    drop: Callable[[str], bool] = lambda _name: False,
    extra: Sequence[tuple[str, np.ndarray, GGMLQuantizationType]] = (),
    architecture: str | None = None,
) -> Path:
    """A copy of the GGUF file `source` at `target`, its metadata as it is (its architecture named
    `architecture` where given), without the tensors `drop` names and with `extra` (name, values,
    type) added: a file that disagrees with itself in one chosen way, for the refusal tests."""
    reader = gguf.GGUFReader(source)
    written = reader.get_field("general.architecture")
    assert written is not None, f"{source} names no general.architecture"
    writer = gguf.GGUFWriter(target, architecture or str(written.contents()))
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        writer.add_key_value(
            field.name, field.contents(), field.types[0], field.types[-1] if len(field.types) > 1 else None
        )
    for tensor in reader.tensors:
        if not drop(tensor.name):
            writer.add_tensor(tensor.name, np.asarray(tensor.data), raw_dtype=tensor.tensor_type)
    for name, values, kind in extra:
        writer.add_tensor(name, values, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return target
