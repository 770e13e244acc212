"""Linear layers with their weight reordered once, at load, into oneDNN's blocked CPU layout.

On a CPU with oneDNN, a matmul against a plain row-major weight reorders it on every call; a
prepacked weight skips that (measured on the bundled model in bf16: about 1.6x faster for one
row, 1.5x for 32, ~5% for long prefills, with bitwise-equal results). Elsewhere (GPU, no oneDNN,
a dtype it cannot pack) the plain weight is used as it is.

Inside a graph being compiled (the one-request decode step, `compiled_decode`) the packed copy
cannot be traced, so the plain weight is used there: on a CPU as one dot product per output row,
which inductor turns into a single pass over the weight at memory speed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


def _packable(weight: torch.Tensor) -> bool:
    """Whether this torch build can prepack `weight` for oneDNN's CPU matmul."""
    if weight.device.type != "cpu" or weight.dim() != 2 or not torch.backends.mkldnn.is_available():  # type: ignore[no-untyped-call]
        return False
    if weight.dtype == torch.float32:
        return True
    return weight.dtype == torch.bfloat16 and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


@dataclass(frozen=True)
class PackedLinear:
    """y = x @ weight.T + bias over rows x [rows, in_features], with the weight prepacked when it can be."""

    plain: torch.Tensor  # [out, in], row-major (shared with the loaded weights, not a copy)
    packed: torch.Tensor | None  # oneDNN's opaque packed copy of `plain`, where this build can pack
    bias: torch.Tensor | None

    @classmethod
    def of(cls, weight: torch.Tensor, bias: torch.Tensor | None = None) -> PackedLinear:
        """Pack `weight` (a new copy; the plain one is kept untouched) where this build can."""
        if _packable(weight) and (bias is None or bias.dtype == weight.dtype):
            return cls(weight, torch.ops.mkldnn._reorder_linear_weight(weight, 1), bias)
        return cls(weight, None, bias)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """The projection of 2-D rows x."""
        if torch.compiler.is_compiling():
            return _traceable_linear(x, self.plain, self.bias)
        if self.packed is not None:
            out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")
            return out
        return F.linear(x, self.plain, self.bias)


def _traceable_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """The projection in a form torch.compile can fuse: on a CPU, a dot product per output row
    accumulated in fp32 (a matrix-vector product bound by reading the weight once); elsewhere
    F.linear, which the compiler hands to the device's matmul."""
    if x.device.type != "cpu":
        return F.linear(x, weight, bias)
    out = (weight.float()[None] * x.float()[:, None]).sum(-1)
    if bias is not None:
        out = out + bias.float()
    return out.to(x.dtype)
