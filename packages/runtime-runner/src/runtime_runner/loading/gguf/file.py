"""A GGUF file as this decoder reads it: its metadata, and its tensors under the Hugging Face names
the loader asks for, each of a type the runner serves.

Opening one refuses, in one line, an architecture this decoder does not run (llama.cpp's BERT
embedding files, say), a tensor it has no place for (llama.cpp's `rope_freqs` of Llama 3 scaling)
or of a type it does not serve (IQ4_XS, TQ2_0, ...): the file is refused at resolution and at load,
never half-served.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType

from runtime_runner.errors import CheckpointError, UnsupportedConfigError
from runtime_runner.kernels.quantized_tensor import KIND_OF_TYPE
from runtime_runner.loading.gguf.format import StringArray, TensorEntry, read_gguf_layout
from runtime_runner.loading.gguf.names import hf_name_of

# The tensor types served: read dense, or kept in their blocks (runtime_runner.kernels.quantized_tensor).
DENSE_TYPES = (GGMLQuantizationType.F32, GGMLQuantizationType.F16, GGMLQuantizationType.BF16)
BLOCK_TYPES = tuple(KIND_OF_TYPE)
ACCEPTED_TYPES = ", ".join(t.name for t in (*DENSE_TYPES, *BLOCK_TYPES))
# llama.cpp's architecture name -> the entry class's architecture (config.json's architectures[0]).
GGUF_ARCHITECTURES: MappingProxyType[str, str] = MappingProxyType(
    {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
)


class GgufFile:
    """One opened GGUF file; a tensor's bytes are read from the file when the loader asks for them."""

    def __init__(self, path: Path) -> None:
        """Read `path`'s header and index its tensors by Hugging Face name; CheckpointError for a file
        that is not GGUF, UnsupportedConfigError for an architecture not served from GGUF, or a tensor
        without a place here or of a type not served."""
        self.path = path
        layout = read_gguf_layout(path)
        self.metadata = layout.metadata
        self.architecture = str(self.metadata.get("general.architecture", ""))  # llama.cpp's name: llama, qwen2, ...
        if self.architecture not in GGUF_ARCHITECTURES:
            raise UnsupportedConfigError(
                f"{path.name}: GGUF architecture {self.architecture!r} is not served from GGUF; "
                f"accepted: {', '.join(GGUF_ARCHITECTURES)} (or its Hugging Face checkpoint directory)"
            )
        tensors: dict[str, TensorEntry] = {}
        for tensor in layout.tensors:
            name = hf_name_of(tensor.name)
            if name is None:
                raise UnsupportedConfigError(
                    f"{path.name}: tensor {tensor.name} has no place in this build's "
                    f"{self.architecture} decoder; accepted: token_embd, output_norm, output and per "
                    "layer attn_norm, attn_q/k/v(_norm), attn_output, ffn_norm, ffn_gate/up/down"
                )
            if tensor.tensor_type not in (*DENSE_TYPES, *BLOCK_TYPES):
                raise UnsupportedConfigError(
                    f"{path.name}: tensor {tensor.name} is {tensor.tensor_type.name}, a type this build "
                    f"does not serve; accepted: {ACCEPTED_TYPES}"
                )
            tensors[name] = tensor
        self.tensors: Mapping[str, TensorEntry] = MappingProxyType(tensors)

    def field(self, key: str) -> Any:
        """A metadata value (`{arch}.block_count` with the architecture filled in), None when absent."""
        return self.metadata.get(key.format(arch=self.architecture))

    def integer(self, key: str, *, least: int = 1) -> int:
        """A metadata count or size the decoder cannot do without (`{arch}.block_count`): an integer
        of at least `least`; CheckpointError naming the key when it is absent or anything else."""
        value = self.optional_integer(key, least=least)
        if value is None:
            raise self._lacks(key)
        return value

    def optional_integer(self, key: str, *, least: int = 1) -> int | None:
        """A metadata integer of at least `least`, None when absent; CheckpointError naming the key
        when it is another type or smaller."""
        value = self.field(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise self._malformed(key, value, f"an integer of at least {least}")
        return value

    def real(self, key: str) -> float:
        """A positive, finite metadata number the decoder cannot do without (a norm epsilon)."""
        value = self.optional_real(key)
        if value is None:
            raise self._lacks(key)
        return value

    def optional_real(self, key: str) -> float | None:
        """A positive, finite metadata number, None when absent; CheckpointError naming the key otherwise."""
        value = self.field(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
            raise self._malformed(key, value, "a positive, finite number")
        return float(value)

    def array_length(self, key: str) -> int | None:
        """The length of a metadata array (`tokenizer.ggml.tokens`), None when absent; CheckpointError
        naming the key when it is no array."""
        value = self.field(key)
        if value is None:
            return None
        if not isinstance(value, (tuple, StringArray)):
            raise self._malformed(key, value, "an array")
        return len(value)

    def _lacks(self, key: str) -> CheckpointError:
        return CheckpointError(
            f"{self.path.name} lacks metadata {key.format(arch=self.architecture)}; accepted: a GGUF file "
            "written by llama.cpp's converter (it writes every hyperparameter)"
        )

    def _malformed(self, key: str, value: Any, accepted: str) -> CheckpointError:
        shown = repr(value) if len(repr(value)) <= 40 else f"{type(value).__name__} {repr(value)[:40]}..."
        return CheckpointError(
            f"{self.path.name}: metadata {key.format(arch=self.architecture)} = {shown}; accepted: {accepted} "
            "(the file is corrupt, or was written by another tool)"
        )

    def values(self, tensor: TensorEntry) -> np.ndarray:
        """A copy of `tensor`'s bytes as numpy holds them: F32/F16 numbers [..., row length]; any
        other type as raw bytes [..., bytes per row]."""
        dtype = {GGMLQuantizationType.F32: np.float32, GGMLQuantizationType.F16: np.float16}.get(
            tensor.tensor_type, np.uint8
        )
        raw = np.fromfile(self.path, dtype=np.uint8, count=tensor.nbytes, offset=tensor.offset).view(dtype)
        return raw.reshape(*tensor.shape[:-1], -1)

    def type_counts(self) -> Mapping[str, int]:
        """How many tensors the file holds of each type (`{"F32": 61, "Q4_1": 210, ...}`)."""
        return MappingProxyType(dict(sorted(Counter(t.tensor_type.name for t in self.tensors.values()).items())))
