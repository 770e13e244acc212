"""A group run one matmul per part (ConcatProjection: an unfused group, or a fused group whose
matrices differ in kind, as llama-quantize's Q4_K_M writes q|k|v) answers one native entry, the
projection stack's, which writes exactly what its call writes: the parts' outputs side by side,
bitwise, whatever the kinds (quantized of two kinds beside a dense batch-invariant linear), in
fp32 and bf16, for one row and many at a stride wider than the rows; a part without a C entry
leaves the group without one; parts that do not fit together are refused naming what differs."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import torch
from gguf import quants

from runtime_runner.kernels.batch_invariant_linear import InvariantLinear
from runtime_runner.kernels.packed_linear import PackedLinear
from runtime_runner.kernels.projection_stack import ProjectionStack
from runtime_runner.kernels.quantized_linear import QuantizedLinear
from runtime_runner.kernels.quantized_tensor import GGML_TYPE_OF, QuantizedTensor
from runtime_runner.models.matrix_projection import ConcatProjection

_ENTRY = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64
)
K = 96


def _quantized(kind: str, n: int, seed: int) -> QuantizedTensor:
    gen = torch.Generator().manual_seed(seed)
    values = torch.randn(n, K, generator=gen).numpy()
    blocks = torch.from_numpy(np.asarray(quants.quantize(values, GGML_TYPE_OF[kind])))  # type: ignore[index]
    return QuantizedTensor(kind, blocks, None, (n, K))  # type: ignore[arg-type]


def _group(dtype: torch.dtype) -> ConcatProjection:
    """q5_0 rows with a bias, q8_0 rows, then dense rows: three kernels, 40 + 24 + 20 columns."""
    gen = torch.Generator().manual_seed(3)
    return ConcatProjection(
        (
            QuantizedLinear.of(_quantized("q5_0", 40, 1), torch.randn(40, generator=gen), dtype),
            QuantizedLinear.of(_quantized("q8_0", 24, 2), None, dtype),
            InvariantLinear.of(torch.randn(20, K, generator=gen).to(dtype), torch.randn(20, generator=gen).to(dtype)),
        )
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 9])
def test_the_stacks_entry_writes_the_parts_outputs_side_by_side_bitwise(dtype: torch.dtype, rows: int) -> None:
    """Reverse-verified by hand: with projection_stack.cpp copying each part's rows at the part's
    own width as the row stride, every case with 9 rows failed (1 row passed, as it must)."""
    group = _group(dtype)
    native = group.native
    assert native is not None and (native.in_features, native.out_features) == (K, 84)
    x = torch.randn(rows, K + 30, generator=torch.Generator().manual_seed(4)).to(dtype)
    out = torch.full((rows, 84), float("nan"), dtype=dtype)
    _ENTRY(native.entry)(native.matrix, x.data_ptr(), K + 30, rows, out.data_ptr(), 2)
    want = group(x[:, :K].contiguous())
    bits = torch.int16 if dtype == torch.bfloat16 else torch.int32
    assert torch.equal(out.view(bits), want.view(bits))


def test_a_part_without_a_c_entry_leaves_the_group_without_one() -> None:
    dense = torch.randn(16, K)
    group = ConcatProjection(
        (QuantizedLinear.of(_quantized("q8_0", 16, 5), None, torch.float32), PackedLinear.of(dense))
    )
    assert group.native is None


def test_parts_that_do_not_fit_together_are_refused_naming_what_differs() -> None:
    narrow = QuantizedLinear.of(_quantized("q8_0", 16, 6), None, torch.float32).native
    wide = InvariantLinear.of(torch.randn(16, 2 * K)).native
    bf16 = QuantizedLinear.of(_quantized("q8_0", 16, 7), None, torch.bfloat16).native
    with pytest.raises(ValueError, match=r"one in_features and one activation dtype; got .*\[\(96, 4\), \(192, 4\)\]"):
        ProjectionStack.of([narrow, wide])
    with pytest.raises(ValueError, match=r"\[\(96, 2\), \(96, 4\)\]"):
        ProjectionStack.of([narrow, bf16])
