"""Projections of the same rows whose outputs stand side by side, run as one native projection
(projection_stack.cpp): a fused group whose matrices differ in kind (llama-quantize's Q4_K_M
writes a Q8_0 or Q6_K v beside Q5_0 or Q4_K q and k), or any group run one matmul per part.

Each part runs its own kernel through its own C entry, and the stack copies its rows into its
columns, so the result is bitwise what the parts' calls give side by side (torch.cat of them, which
is what the op-by-op forward computes); the native step calls the stack through the native
projection ABI like any other projection.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from native_build import load_library
from runtime_runner.kernels.native_projection import NativeProjectionEntry, address_of

WHAT = "the runner's projection stack"
SOURCE = Path(__file__).with_name("projection_stack.cpp")
# The stack computes nothing: it calls the parts' entries and copies their rows.
FLAGS = ("-O3", "-shared", "-fPIC", "-std=c++17")


class _Part(ctypes.Structure):
    _fields_ = [("entry", ctypes.c_void_p), ("matrix", ctypes.c_void_p), ("n", ctypes.c_int64)]


class _Stack(ctypes.Structure):
    _fields_ = [
        ("count", ctypes.c_int64),
        ("n", ctypes.c_int64),
        ("element_size", ctypes.c_int64),
        ("parts", ctypes.POINTER(_Part)),
    ]


@functools.cache
def _library() -> ctypes.CDLL:
    """The stack, loaded once per process (built first on a machine that never had it)."""
    library = load_library(SOURCE, FLAGS, package="runtime-runner", what=WHAT)
    pointer, i64 = ctypes.c_void_p, ctypes.c_int64
    library.projection_stack.argtypes = [pointer, pointer, i64, i64, pointer, i64]
    library.projection_stack.restype = None
    return library


@dataclass(frozen=True, eq=False)
class ProjectionStack:
    """The parts' entries run as one native projection (see the module). It holds addresses only:
    whoever builds it keeps the parts alive."""

    entries: tuple[NativeProjectionEntry, ...]
    parts: ctypes.Array[_Part]  # the descriptor's array, which this object keeps alive
    stack: _Stack

    @classmethod
    def of(cls, entries: Sequence[NativeProjectionEntry]) -> ProjectionStack:
        """The stack of `entries` (one or more, of one in_features and one activation element
        size), their outputs in that order; ValueError otherwise."""
        shapes = {(entry.in_features, entry.element_size) for entry in entries}
        if len(shapes) != 1:
            raise ValueError(
                "a projection stack runs parts of one in_features and one activation dtype; got "
                f"(in_features, element bytes) {sorted(shapes)}"
            )
        parts = (_Part * len(entries))(*(_Part(entry.entry, entry.matrix, entry.out_features) for entry in entries))
        (element_size,) = {entry.element_size for entry in entries}
        stack = _Stack(len(entries), sum(entry.out_features for entry in entries), element_size, parts)
        _library()  # built now, at load, rather than on the first request
        return cls(tuple(entries), parts, stack)

    @property
    def native(self) -> NativeProjectionEntry:
        """The stack through the native projection ABI."""
        return NativeProjectionEntry(
            address_of(_library().projection_stack),
            ctypes.addressof(self.stack),
            self.entries[0].in_features,
            int(self.stack.n),
            int(self.stack.element_size),
        )
