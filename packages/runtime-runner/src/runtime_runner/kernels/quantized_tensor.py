"""A weight matrix kept quantized in memory: GGUF's block formats as the file stores them (the
32-value types and the K-quants' super-blocks of 256), or int8 with one scale per output row.

Every kind quantizes along a row (the input features), so rows are independent: a fused group
(q|k|v, gate|up) is its matrices' rows one after another (`cat`), and reordering rows (the Q/K
head permutation GGUF files of the Llama family carry) moves whole rows of bytes (`rows_at`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, quants

QuantKind = Literal["q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "int8"]
# GGUF kind -> its GGML type (blocks of 32 values, the K-quants super-blocks of 256).
GGML_TYPE_OF: MappingProxyType[QuantKind, GGMLQuantizationType] = MappingProxyType(
    {
        "q8_0": GGMLQuantizationType.Q8_0,
        "q4_0": GGMLQuantizationType.Q4_0,
        "q4_1": GGMLQuantizationType.Q4_1,
        "q5_0": GGMLQuantizationType.Q5_0,
        "q5_1": GGMLQuantizationType.Q5_1,
        "iq4_nl": GGMLQuantizationType.IQ4_NL,
        "q2_k": GGMLQuantizationType.Q2_K,
        "q3_k": GGMLQuantizationType.Q3_K,
        "q4_k": GGMLQuantizationType.Q4_K,
        "q5_k": GGMLQuantizationType.Q5_K,
        "q6_k": GGMLQuantizationType.Q6_K,
    }
)
# GGML type -> the GGUF kind that keeps it quantized.
KIND_OF_TYPE: MappingProxyType[GGMLQuantizationType, QuantKind] = MappingProxyType(
    {ggml_type: kind for kind, ggml_type in GGML_TYPE_OF.items()}
)
# GGUF kind -> (values per block, bytes per block), as ggml sizes its types.
BLOCKS: MappingProxyType[str, tuple[int, int]] = MappingProxyType(
    {kind: GGML_QUANT_SIZES[ggml_type] for kind, ggml_type in GGML_TYPE_OF.items()}
)


@dataclass(frozen=True)
class QuantizedTensor:
    """A quantized [out_features, in_features] matrix.

    - GGUF kinds (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl and the K-quants q2_k..q6_k): `data` is
      uint8 [N, K / block values * block bytes], each row its blocks exactly as a GGUF file lays
      them out; `scales` is None.
    - int8: `data` is int8 [N, K], `scales` fp32 [N]; value = data * scale of its row.
    """

    kind: QuantKind
    data: torch.Tensor
    scales: torch.Tensor | None
    shape: tuple[int, int]  # (N, K)

    def __post_init__(self) -> None:
        n, k = self.shape
        if self.kind == "int8":
            if (
                self.data.dtype != torch.int8
                or tuple(self.data.shape) != (n, k)
                or self.scales is None
                or self.scales.dtype != torch.float32
                or tuple(self.scales.shape) != (n,)
            ):
                raise ValueError(
                    f"an int8 QuantizedTensor {self.shape} holds int8 data [{n}, {k}] and fp32 scales [{n}]; got "
                    f"data {self.data.dtype} {tuple(self.data.shape)}, scales "
                    f"{None if self.scales is None else (self.scales.dtype, tuple(self.scales.shape))}"
                )
            return
        if self.kind not in BLOCKS:
            raise ValueError(f"quantized kind {self.kind!r} is not one of {', '.join([*BLOCKS, 'int8'])}")
        values, block_bytes = BLOCKS[self.kind]
        if k % values:
            raise ValueError(
                f"a {self.kind} matrix has rows of whole {values}-value blocks; in_features = {k} is not a multiple "
                f"of {values}"
            )
        row_bytes = k // values * block_bytes
        if self.data.dtype != torch.uint8 or tuple(self.data.shape) != (n, row_bytes) or self.scales is not None:
            raise ValueError(
                f"a {self.kind} QuantizedTensor {self.shape} holds uint8 blocks [{n}, {row_bytes}] and no scales; "
                f"got {self.data.dtype} {tuple(self.data.shape)}"
            )

    @property
    def out_features(self) -> int:
        """N, the number of rows."""
        return self.shape[0]

    @property
    def in_features(self) -> int:
        """K, the length of a row."""
        return self.shape[1]

    @property
    def nbytes(self) -> int:
        """Bytes held in memory (blocks, and scales for int8)."""
        return self.data.numel() * self.data.element_size() + (0 if self.scales is None else self.scales.numel() * 4)

    def dequantize(self) -> torch.Tensor:
        """The fp32 matrix [N, K] the quantized values stand for (the reference the kernels are held to)."""
        if self.kind == "int8":
            assert self.scales is not None
            return self.data.float() * self.scales[:, None]
        values = quants.dequantize(self.data.numpy(), GGML_TYPE_OF[self.kind])
        return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).reshape(self.shape)

    def rows_at(self, order: torch.Tensor) -> QuantizedTensor:
        """The matrix with its rows taken in `order` (int64 row indices)."""
        scales = None if self.scales is None else self.scales.index_select(0, order).contiguous()
        return QuantizedTensor(
            self.kind, self.data.index_select(0, order).contiguous(), scales, (int(order.shape[0]), self.shape[1])
        )

    @staticmethod
    def cat(parts: Sequence[QuantizedTensor]) -> QuantizedTensor:
        """The parts' rows one after another (one kind and one in_features)."""
        kinds, widths = {p.kind for p in parts}, {p.in_features for p in parts}
        if len(kinds) != 1 or len(widths) != 1:
            raise ValueError(
                f"QuantizedTensor.cat joins matrices of one kind and one in_features; got kinds {sorted(kinds)}, "
                f"in_features {sorted(widths)}"
            )
        scales = None
        if parts[0].scales is not None:
            scales = torch.cat([p.scales for p in parts if p.scales is not None])
        return QuantizedTensor(
            parts[0].kind,
            torch.cat([p.data for p in parts]),
            scales,
            (sum(p.out_features for p in parts), parts[0].in_features),
        )


def int8_per_channel_of(weight: torch.Tensor) -> QuantizedTensor:
    """`weight` [N, K] (a CPU float32, bfloat16 or float16 matrix of finite values) quantized to
    int8, symmetric per output row: scale = max |w_row| / 127 in fp32, q = round(w / scale) to
    nearest (ties to even), so |q| <= 127; an all-zero row has scale 0 and q 0. ValueError for
    anything else."""
    if (
        weight.device.type != "cpu"
        or weight.dtype not in (torch.float32, torch.bfloat16, torch.float16)
        or weight.dim() != 2
    ):
        raise ValueError(
            f"int8 quantization takes a CPU 2-D float32, bfloat16 or float16 weight [out, in]; got shape "
            f"{tuple(weight.shape)}, dtype {weight.dtype}, device {weight.device}"
        )
    wide = weight.detach().float()
    if not bool(wide.isfinite().all()):
        raise ValueError("int8 quantization takes a weight of finite values; this one holds a NaN or an infinity")
    scales = wide.abs().amax(dim=1) / 127 if wide.shape[1] else wide.new_zeros(wide.shape[0])
    safe = torch.where(scales > 0, scales, torch.ones_like(scales))
    data = (wide / safe[:, None]).round().clamp(-127, 127).to(torch.int8)
    return QuantizedTensor("int8", data, scales.contiguous(), (int(weight.shape[0]), int(weight.shape[1])))
