"""Attention as a C entry a native caller runs per layer: the seam of the runner's whole-step forward.

A runner that runs every layer of a forward in one C++ call (runtime_runner's native step) cannot
call back into Python for each layer's attention. A backend that can attend from C++ answers
`native_attention(dtype, kv_dtype)` after `plan`, with this forward's entry for q in `dtype` over
pools in `kv_dtype`:

    extern "C" void entry(const void* plan, const void* q, int64_t q_row_stride, int64_t q_head_stride,
                          const void* k_pool, const void* v_pool, int64_t kv_head_stride,
                          int64_t kv_slot_stride, int64_t heads, int64_t kv_heads, int64_t head_dim,
                          double scale, int64_t threads, void* out);

- `plan` is the backend's own description of the planned query rows (opaque to the caller), kept
  alive by the backend until its next plan;
- q holds the forward's rows in the planned order, [tokens, heads, head_dim] at the given element
  strides (unit stride along head_dim); the pools are the layer's [kv_heads, slots, head_dim] at the
  given strides, with this layer's new keys and values already written;
- `out` is a contiguous [rows, heads, head_dim] in q's dtype; the entry opens its own OpenMP region
  of at most `threads` threads, and computes exactly what `attend` computes for the same inputs.

A backend without such an entry answers None, and the runner then runs the forward op by op.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NativeAttention:
    """One planned forward's attention as a native caller calls it: the entry's address and the plan's."""

    entry: int  # address of the C entry for the forward's q and pool dtypes
    plan: int  # address of the plan the entry reads (alive until the backend plans again)
