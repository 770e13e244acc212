"""The batch-1 weight-read floor: the decode rate a step would reach if it did nothing but read, once,
every weight byte a decode step's kernels read (each layer's projections as their kernels hold them,
packed bf16 panels or quantized blocks, and the LM head), at the speed this machine reads memory.

The speed is measured, not assumed: a C++ pass (weight_read_floor.cpp, built once by native_build
like the runner's kernels) streams a buffer of that many bytes with the step's thread count, best of
several passes. A decode step cannot beat the floor by much (a little of the weights may stay in the
last-level cache from the step before); the benchmarks report each engine's decode rate against it.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import time
from pathlib import Path

import torch

from native_build import load_library

SOURCE = Path(__file__).with_name("weight_read_floor.cpp")
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17")


@functools.cache
def _library() -> ctypes.CDLL:
    library = load_library(SOURCE, FLAGS, package="bench-tools", what="the weight-read floor's reader")
    library.read_all.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    library.read_all.restype = ctypes.c_int64
    return library


def kernel_bytes(projection: object) -> int:
    """Bytes a projection's kernel reads per call: the tensors it holds, but the plain weight it may
    keep beside its packed copy (which the kernel never reads)."""
    if not dataclasses.is_dataclass(projection):
        raise TypeError(f"kernel_bytes reads a projection dataclass's tensors; got {type(projection).__name__}")
    held = (getattr(projection, field.name) for field in dataclasses.fields(projection) if field.name != "plain")
    return sum(t.numel() * t.element_size() for t in held if isinstance(t, torch.Tensor))


def decode_weight_bytes(model: object) -> int:
    """Every weight byte one decode step of a Llama-family decoder reads (its projections and its head)."""
    projections = model.projections
    head = model.head_projection
    layers = sum(kernel_bytes(p) for layer in projections for p in (layer.qkv, layer.o, layer.gate_up, layer.down))
    return layers + kernel_bytes(head)


def read_seconds(nbytes: int, threads: int, passes: int = 5) -> float:
    """The best time of `passes` reads of a fresh `nbytes` buffer with `threads` threads."""
    buffer = torch.ones(nbytes, dtype=torch.uint8)
    best = float("inf")
    for _ in range(passes):
        started = time.perf_counter()
        _library().read_all(buffer.data_ptr(), nbytes, threads)
        best = min(best, time.perf_counter() - started)
    return best


def weight_read_floor(model: object, threads: int | None = None) -> float:
    """Batch-1 tokens per second if a step only read its weights once (see the module)."""
    return 1.0 / read_seconds(decode_weight_bytes(model), threads or torch.get_num_threads())
