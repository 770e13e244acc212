"""The C entry every CPU projection kind exports, so that a whole decoder step can run in C++.

The runner's native step (runtime_runner.models.native_step) runs every layer of a forward in one call,
without returning to Python between ops. It calls each projection through this one ABI, whatever
kind it is (the bf16/fp32 batch-invariant linear, a GGUF block-quantized matrix, per-channel int8):

    extern "C" void entry(const void* matrix, const void* x, int64_t ldx, int64_t rows,
                          void* out, int64_t threads);

- `matrix` is the kind's own descriptor (a ctypes Structure that the Python object keeps alive),
  opaque to the caller;
- `x` is `rows` activation rows in the projection's activation dtype, row i at x + i * ldx
  elements, contiguous along in_features;
- `out` is a contiguous [rows, out_features] of the activation dtype, written whole (the bias,
  if any, already added);
- the entry opens its own OpenMP region of at most `threads` threads, and row i of `out` depends
  on x[i] and the matrix alone (batch invariance), exactly as the kind's Python call computes it.

A projection that has such an entry answers `native` with it; one that has none (oneDNN's packed
linear, or a group holding one) answers None, and the forward then runs op by op in Python. A group
run one matmul per part answers the projection stack's entry (projection_stack), which runs its
parts' entries side by side.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class NativeProjectionEntry:
    """One projection as the native step calls it: the C entry's address and its descriptor's."""

    entry: int  # address of the kind's C entry for this activation dtype
    matrix: int  # address of the descriptor the entry reads
    in_features: int
    out_features: int
    element_size: int  # bytes of one activation (and output) element


@runtime_checkable
class NativeProjection(Protocol):
    """A projection that may be called from C++ through the ABI above."""

    @property
    def native(self) -> NativeProjectionEntry | None:
        """Its entry, or None when this projection runs only from Python."""
        ...


def address_of(function: ctypes._CFuncPtr) -> int:  # type: ignore[name-defined]
    """The address of a loaded C function (a ctypes function of a loaded library)."""
    address = ctypes.cast(function, ctypes.c_void_p).value
    if address is None:
        raise ValueError(f"{function!r} has no address")
    return address
