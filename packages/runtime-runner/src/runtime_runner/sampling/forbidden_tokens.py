"""A grammar's bitmask applied to fp32 logits on a CPU in one native pass (forbidden_tokens.cpp),
compiled on first use (native_build) into ~/.cache/runtime-runner like the runner's other kernels.

On other devices and dtypes the sampler unpacks the bitmask with torch
(`runtime_runner.sampling.logit_constraints`); both set exactly the forbidden logits to -inf.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from pathlib import Path

import torch

from native_build import load_library

WHAT = "the sampler's grammar mask"
SOURCE = Path(__file__).with_name("forbidden_tokens.cpp")
FLAGS = ("-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-shared", "-fPIC", "-std=c++17")


@functools.cache
def _library() -> ctypes.CDLL:
    library = load_library(SOURCE, FLAGS, package="runtime-runner", what=WHAT)
    i64, pointer = ctypes.c_int64, ctypes.c_void_p
    library.mask_forbidden_float32.argtypes = [pointer, i64, pointer, i64, pointer, i64, i64, pointer, i64]
    library.mask_forbidden_float32.restype = None
    return library


def masks_natively(logits: torch.Tensor) -> bool:
    """Whether `mask_forbidden` takes these logits: fp32 on a CPU, rows of unit stride."""
    return logits.device.type == "cpu" and logits.dtype == torch.float32 and logits.stride(1) == 1


def mask_forbidden(logits: torch.Tensor, rows: Sequence[int], bitmask: torch.Tensor) -> list[bool]:
    """Set `logits[rows[k], t]` to -inf, in place, for every token t < vocab that bit t of
    `bitmask` row k (int32 [len(rows), words]) forbids; for each row, whether any token is allowed."""
    vocab = logits.shape[1]
    if not masks_natively(logits) or bitmask.dtype != torch.int32 or not bitmask.is_contiguous():
        raise ValueError(
            f"mask_forbidden takes fp32 CPU logits with unit-stride rows and a contiguous int32 bitmask; got "
            f"logits {logits.dtype} on {logits.device} strides {logits.stride()}, bitmask {bitmask.dtype}"
        )
    if bitmask.shape[0] != len(rows) or bitmask.shape[1] * 32 < vocab:
        raise ValueError(f"bitmask {tuple(bitmask.shape)} does not cover {len(rows)} rows of {vocab} tokens")
    row_ids = torch.tensor(list(rows), dtype=torch.int64)
    if len(rows) and not 0 <= min(rows) <= max(rows) < logits.shape[0]:
        raise ValueError(f"rows {list(rows)} outside the logits' {logits.shape[0]} rows")
    allowed = torch.zeros(len(rows), dtype=torch.uint8)
    _library().mask_forbidden_float32(
        logits.data_ptr(),
        logits.stride(0),
        bitmask.data_ptr(),
        bitmask.shape[1],
        row_ids.data_ptr(),
        len(rows),
        vocab,
        allowed.data_ptr(),
        torch.get_num_threads(),
    )
    return [bool(a) for a in allowed.tolist()]
