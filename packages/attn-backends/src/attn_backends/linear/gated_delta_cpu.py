"""The cpu_fused linear-attention kernels: Gated-DeltaNet's delta rule and causal conv in C++ (gated_delta_cpu.cpp).

The six entry points of torch_native (gated_delta_rule.py, causal_conv_state.py) with the same
signatures, operand checks and results (to float32 rounding), for CPU tensors.

Why it is faster: torch runs a decode step of the delta rule as about ten ops over the gathered
states (gather the slots, widen, decay, k^T S, delta, the rank-one write, q^T S, narrow, scatter
back), each a pass over every state with a temporary of its size and a hand-off between OpenMP
threads. Here each (request, value head) is one task: its state is read from its slot, decayed,
written back with the rank-one update in the pool's dtype and the output summed on the way, so a
decode costs about one read and one write of the states. A prompt's tokens sweep the state once
each. The conv decode is likewise one pass (shift the slot's window, dot, SiLU) instead of a
concatenation, a copy, a product, a sum and a SiLU. It stays a call of its own rather than being
fused into the delta rule's: the interface gives them separate entry points, the layer splits,
repeats and gates between them, and the conv decode measures a fifth of the rule's time at batch 1
and a thirteenth at batch 32 (below), which bounds what a fused call could save.

Measured on the 2-core AMD EPYC (AVX2) development host, 2 threads, fp32 operands, Dk = Dv = 128,
best of 3, microseconds per call (whole layers are timed in docs/benchmarks.md):

    decode, gated delta rule         torch_native   cpu_fused
      16 heads, batch 1, fp32 pool          1,834         143
      16 heads, batch 32, fp32 pool       113,610       1,961
      32 heads, batch 1, fp32 pool          3,693         231
      32 heads, batch 32, fp32 pool       210,018       5,839
      32 heads, batch 1, bf16 pool          1,897         279
      32 heads, batch 32, bf16 pool       255,163       5,689
    decode, causal conv, 8192 channels
      batch 1                                 304          49
      batch 32                              5,281         457
    prefill, 16 heads, one prompt    torch chunked   C++ recurrent
      16 tokens                             8,116         489
      64 tokens                             8,847       1,664
      256 tokens                           30,525       6,359
      1024 tokens                         123,336      24,883
      4096 tokens                         827,500     151,900
    prefill, causal conv, 8192 channels
      16 / 64 / 256 / 1024 tokens   1,296 / 3,750 / 12,074 / 181,646   179 / 525 / 2,032 / 21,886

Prefill: the C++ recurrence sweeps each state once per token; torch's chunked form
(gated_delta_rule.gated_delta_prefill, 64-token chunks of matmuls and triangular solves) was
measured against it at every length above and lost at each, by 5x from 64 tokens on and 17x at
16, its cost per token growing with the prompt rather than shrinking. So prefill here is the
recurrence at every length and the chunked form is not called; the figures are the evidence.

Not a torch custom op (as the paged-attention kernel is): on this host a custom op's eager
dispatch cost about 45 us a call, a third of a batch-1 decode step of the rule, and nothing
traces these kernels (the compiled decode step covers full attention only).

The source ships with the package and is compiled on first use with the system's C++ compiler
(native_build; about 15 s) into ~/.cache/attn-backends, keyed by the source, flags and CPU.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from attn_backends.linear.causal_conv_state import check_causal_conv_operands
from attn_backends.linear.gated_delta_rule import check_gated_delta_operands
from attn_backends.linear.varlen_layout import checked_offsets
from native_build import load_library

WHAT = "the cpu_fused linear-attention kernels"
SOURCE = Path(__file__).with_name("gated_delta_cpu.cpp")
# -fno-trapping-math: no code here reads floating-point exception flags, and without it GCC keeps
# the clamps of the conv's exp as branches, which leaves that loop scalar. Results are unchanged.
FLAGS = ("-O3", "-march=native", "-fno-trapping-math", "-fopenmp", "-shared", "-fPIC", "-std=c++17")
# The element types the C++ reads, by its codes: activations in the first three, pools in all
# (the gated-delta pool is one of POOL_DTYPES, already checked; a conv pool may be float64 too).
_CODE_OF_DTYPE = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2, torch.float64: 3}
_ACTIVATION_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


class _GatedDeltaArgs(ctypes.Structure):
    """GatedDeltaArgs in gated_delta_cpu.cpp, field for field."""

    _fields_ = [
        (name, ctypes.c_void_p)
        for name in ("q", "k", "v", "g", "beta", "state", "slots", "cu_seqlens", "has_initial", "out", "states_out")
    ] + [
        (name, ctypes.c_int64)
        for name in (
            "write_pool",
            "requests",
            "heads",
            "dk",
            "dv",
            "pool_slots",
            "q_token",
            "q_head",
            "k_token",
            "k_head",
            "v_token",
            "v_head",
            "g_token",
            "g_head",
            "beta_token",
            "beta_head",
            "state_slot",
            "state_head",
            "state_row",
            "activation_code",
            "pool_code",
            "threads",
        )
    ]


class _CausalConvArgs(ctypes.Structure):
    """CausalConvArgs in gated_delta_cpu.cpp, field for field."""

    _fields_ = [
        (name, ctypes.c_void_p)
        for name in ("x", "weight", "bias", "conv_state", "slots", "cu_seqlens", "has_initial", "y", "windows_out")
    ] + [
        (name, ctypes.c_int64)
        for name in (
            "write_pool",
            "requests",
            "channels",
            "width",
            "pool_slots",
            "x_token",
            "state_slot",
            "state_channel",
            "state_column",
            "activation_code",
            "pool_code",
            "threads",
        )
    ]


@functools.cache
def _library() -> ctypes.CDLL:
    """The kernels, loaded once per process (built first on a machine that never had them)."""
    library = load_library(SOURCE, FLAGS, package="attn-backends", what=WHAT)
    library.gated_delta_recurrence.argtypes = [ctypes.POINTER(_GatedDeltaArgs)]
    library.causal_conv_recurrence.argtypes = [ctypes.POINTER(_CausalConvArgs)]
    library.gated_delta_recurrence.restype = library.causal_conv_recurrence.restype = ctypes.c_int64
    return library


def gated_delta_prefill(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    cu_seqlens: torch.Tensor,
    state: torch.Tensor,
    slots: torch.Tensor,
    has_initial: torch.Tensor,
) -> torch.Tensor:
    """gated_delta_rule.gated_delta_prefill on CPU tensors, by the recurrence: out [T, H, Dv] in
    q's dtype, each sequence's final state written into state[slots[b]] (zeros for an empty fresh one)."""
    check_gated_delta_operands(q, k, v, g, beta, state, slots, cu_seqlens=cu_seqlens, has_initial=has_initial)
    checked_offsets(cu_seqlens, q.shape[0])
    out, _ = _gated_delta(q, k, v, g, beta, state, slots, cu_seqlens, has_initial, write_pool=True, keep_states=False)
    return out


def gated_delta_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
    slots: torch.Tensor,
) -> torch.Tensor:
    """gated_delta_rule.gated_delta_decode on CPU tensors: one step per request, each state[slots[b]]
    updated in place (read and written once); out [B, H, Dv] in q's dtype."""
    check_gated_delta_operands(q, k, v, g, beta, state, slots)
    out, _ = _gated_delta(q, k, v, g, beta, state, slots, None, None, write_pool=True, keep_states=False)
    return out


def gated_delta_verify(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    cu_seqlens: torch.Tensor,
    state: torch.Tensor,
    slots: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """gated_delta_rule.gated_delta_verify on CPU tensors: (out [T, H, Dv], the state after each
    token [T, H, Dk, Dv] in the pool's dtype); the pool stays untouched."""
    check_gated_delta_operands(q, k, v, g, beta, state, slots, cu_seqlens=cu_seqlens)
    checked_offsets(cu_seqlens, q.shape[0])
    return _gated_delta(q, k, v, g, beta, state, slots, cu_seqlens, None, write_pool=False, keep_states=True)


def causal_conv_prefill(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    cu_seqlens: torch.Tensor,
    conv_state: torch.Tensor,
    slots: torch.Tensor,
    has_initial: torch.Tensor,
) -> torch.Tensor:
    """causal_conv_state.causal_conv_prefill on CPU tensors: y [T, C] (SiLU applied) in x's dtype,
    each sequence's last W-1 inputs written into conv_state[slots[b]]."""
    check_causal_conv_operands(x, weight, bias, conv_state, slots, cu_seqlens=cu_seqlens, has_initial=has_initial)
    checked_offsets(cu_seqlens, x.shape[0])
    y, _ = _causal_conv(
        x, weight, bias, conv_state, slots, cu_seqlens, has_initial, write_pool=True, keep_windows=False
    )
    return y


def causal_conv_decode(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, conv_state: torch.Tensor, slots: torch.Tensor
) -> torch.Tensor:
    """causal_conv_state.causal_conv_decode on CPU tensors: y [B, C], each conv_state[slots[b]]
    shifted by its request's input in place."""
    check_causal_conv_operands(x, weight, bias, conv_state, slots)
    y, _ = _causal_conv(x, weight, bias, conv_state, slots, None, None, write_pool=True, keep_windows=False)
    return y


def causal_conv_verify(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    cu_seqlens: torch.Tensor,
    conv_state: torch.Tensor,
    slots: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """causal_conv_state.causal_conv_verify on CPU tensors: (y [T, C], the conv state after each
    token [T, C, W-1] in the pool's dtype); the pool stays untouched."""
    check_causal_conv_operands(x, weight, bias, conv_state, slots, cu_seqlens=cu_seqlens)
    checked_offsets(cu_seqlens, x.shape[0])
    return _causal_conv(x, weight, bias, conv_state, slots, cu_seqlens, None, write_pool=False, keep_windows=True)


def _check_on_cpu(pool: torch.Tensor, what: str) -> None:
    """Refuse operands the C++ cannot address (they have passed the shared checks, so all share
    one device): it reads CPU memory only."""
    if pool.device.type != "cpu":
        raise ValueError(
            f"the cpu_fused {what} kernels run on CPU tensors, not on {pool.device}; there use triton or torch_native"
        )


def _rows(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x in `dtype` with unit stride along its last dimension, as the C++ reads rows (a copy only
    if it is not so already)."""
    if x.dtype != dtype:
        x = x.to(dtype)
    return x if x.stride(-1) == 1 else x.contiguous()


def _activation_dtype(*xs: torch.Tensor) -> torch.dtype:
    """The dtype the C++ reads these operands in: theirs when they share one it has code for,
    else float32 (a widening, exact for the half types, what torch_native computes in anyway)."""
    dtypes = {x.dtype for x in xs}
    only = dtypes.pop()
    return only if not dtypes and only in _ACTIVATION_DTYPES else torch.float32


def _request_rows(
    slots: torch.Tensor, cu_seqlens: torch.Tensor | None, has_initial: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """slots and cu_seqlens as contiguous int64, has_initial as contiguous bools (one byte each)."""

    def int64(t: torch.Tensor) -> torch.Tensor:
        return t.contiguous() if t.dtype == torch.int64 else t.to(torch.int64).contiguous()

    return (
        int64(slots),
        None if cu_seqlens is None else int64(cu_seqlens),
        None if has_initial is None else has_initial.contiguous(),
    )


def _pointer(t: torch.Tensor | None) -> int | None:
    """t's address for the C++, or NULL for an absent operand."""
    return None if t is None else t.data_ptr()


def _raise_for(code: int, slots: torch.Tensor, pool_slots: int) -> None:
    """The C++ answer as an exception, if it is one: -1 is success, b >= 0 the first bad slot."""
    if code >= 0:
        raise IndexError(
            f"slots[{code}] = {int(slots[code])} is outside the pool's {pool_slots} slots (0 to {pool_slots - 1})"
        )
    if code != -1:
        raise RuntimeError(
            f"{WHAT} have no code for these element types (code {code}); this is a bug in gated_delta_cpu.py"
        )


def _gated_delta(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
    slots: torch.Tensor,
    cu_seqlens: torch.Tensor | None,
    has_initial: torch.Tensor | None,
    *,
    write_pool: bool,
    keep_states: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The C++ recurrence over checked operands: (out [T, H, Dv] in q's dtype, the per-token
    states when keep_states, else an empty tensor)."""
    _check_on_cpu(state, "gated-delta")
    if state.stride(3) != 1 and state.shape[3] > 1:
        raise ValueError(
            f"the cpu_fused gated-delta kernels update the pool in place and read its state rows whole: "
            f"its last (Dv) dimension must have stride 1; got strides {state.stride()}"
        )
    dtype, given = _activation_dtype(q, k, v), q.dtype
    q, k, v = (_rows(x, dtype) for x in (q, k, v))
    g, beta = g.float(), beta.float()
    slots, cu_seqlens, has_initial = _request_rows(slots, cu_seqlens, has_initial)
    tokens, heads, dk = q.shape
    dv = v.shape[2]
    out = torch.empty(tokens, heads, dv, dtype=dtype)
    states = torch.empty(tokens if keep_states else 0, heads, dk, dv, dtype=state.dtype)
    args = _GatedDeltaArgs(
        q.data_ptr(),
        k.data_ptr(),
        v.data_ptr(),
        g.data_ptr(),
        beta.data_ptr(),
        state.data_ptr(),
        slots.data_ptr(),
        _pointer(cu_seqlens),
        _pointer(has_initial),
        out.data_ptr(),
        states.data_ptr() if keep_states else None,
        int(write_pool),
        slots.shape[0],
        heads,
        dk,
        dv,
        state.shape[0],
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        v.stride(0),
        v.stride(1),
        g.stride(0),
        g.stride(1),
        beta.stride(0),
        beta.stride(1),
        state.stride(0),
        state.stride(1),
        state.stride(2),
        _CODE_OF_DTYPE[dtype],
        _CODE_OF_DTYPE[state.dtype],
        torch.get_num_threads(),
    )
    _raise_for(_library().gated_delta_recurrence(ctypes.byref(args)), slots, state.shape[0])
    return (out if dtype == given else out.to(given)), states


def _causal_conv(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    conv_state: torch.Tensor,
    slots: torch.Tensor,
    cu_seqlens: torch.Tensor | None,
    has_initial: torch.Tensor | None,
    *,
    write_pool: bool,
    keep_windows: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The C++ conv over checked operands: (y [T, C] in x's dtype, the per-token windows when
    keep_windows, else an empty tensor)."""
    _check_on_cpu(conv_state, "causal-conv")
    if conv_state.dtype not in _CODE_OF_DTYPE:
        raise ValueError(f"the cpu_fused conv pool holds float32, bfloat16, float16 or float64, not {conv_state.dtype}")
    dtype, given = _activation_dtype(x), x.dtype
    x = _rows(x, dtype)
    weight = weight.float().contiguous()
    bias = None if bias is None else bias.float().contiguous()
    slots, cu_seqlens, has_initial = _request_rows(slots, cu_seqlens, has_initial)
    tokens, channels = x.shape
    width = weight.shape[1]
    y = torch.empty(tokens, channels, dtype=dtype)
    windows = torch.empty(tokens if keep_windows else 0, channels, width - 1, dtype=conv_state.dtype)
    args = _CausalConvArgs(
        x.data_ptr(),
        weight.data_ptr(),
        _pointer(bias),
        conv_state.data_ptr(),
        slots.data_ptr(),
        _pointer(cu_seqlens),
        _pointer(has_initial),
        y.data_ptr(),
        windows.data_ptr() if keep_windows else None,
        int(write_pool),
        slots.shape[0],
        channels,
        width,
        conv_state.shape[0],
        x.stride(0),
        conv_state.stride(0),
        conv_state.stride(1),
        conv_state.stride(2),
        _CODE_OF_DTYPE[dtype],
        _CODE_OF_DTYPE[conv_state.dtype],
        torch.get_num_threads(),
    )
    _raise_for(_library().causal_conv_recurrence(ctypes.byref(args)), slots, conv_state.shape[0])
    return (y if dtype == given else y.to(given)), windows
