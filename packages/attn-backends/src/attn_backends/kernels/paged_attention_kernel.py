"""The CPU paged-attention kernel (paged_attention_kernel.cpp): built once per machine, called per layer.

Each query row attends to the first `seq_len` keys of its request (a decode: all of them; the
i-th new token of a prompt with `prefix` cached: prefix + i + 1, which is causal attention), read
where they lie in the pool rather than gathered into a copy first. It is the cpu_paged backend
(docs/benchmarks.md, decode attention). The C++ source ships with the
package and is compiled on first use with the system's C++ compiler (native_build, as
torch.compile's CPU backend does), into ~/.cache/attn-backends keyed by the source, the flags and
the CPU, so later processes load it at once.

It is a torch custom op (`attn_backends::paged_attention`), so the runner's compiled one-request
decode step calls it from inside its graph like any other op.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from pathlib import Path

import torch

from attn_backends.kernels.native_attention import NativeAttention
from native_build import load_library

WHAT = "the cpu_paged attention kernel"
SOURCE = Path(__file__).with_name("paged_attention_kernel.cpp")
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17")
# (q and output dtype, pool dtype) -> entry: each dtype alone, and a bf16 pool under fp32 compute.
# kv_dtypes.py reads its keys: which KV caches cpu_paged attends.
_ENTRY_OF_DTYPES = {
    (torch.bfloat16, torch.bfloat16): "paged_attention_bfloat16",
    (torch.float16, torch.float16): "paged_attention_float16",
    (torch.float32, torch.float32): "paged_attention_float32",
    (torch.float64, torch.float64): "paged_attention_float64",
    (torch.float32, torch.bfloat16): "paged_attention_float32_bfloat16",
}


POOL_DTYPES = frozenset(_ENTRY_OF_DTYPES)  # the (q dtype, pool dtype) pairs the kernel reads


def _accepted_dtypes() -> str:
    return ", ".join(
        f"q {str(q).removeprefix('torch.')} with pools {str(kv).removeprefix('torch.')}" for q, kv in _ENTRY_OF_DTYPES
    )


@dataclass(frozen=True)
class PagedQueries:
    """The query rows of one forward as the kernel reads them (host-built, shared by every layer)."""

    page_table: torch.Tensor  # [requests, pages + 1] int64: the forward's table and a spare column of page 0
    page_size: int
    requests: torch.Tensor  # [rows] int64: each row's request (its row of the page table)
    q_rows: torch.Tensor  # [rows] int64: each row's token in q
    seq_lens: torch.Tensor  # [rows] int64: keys each row sees, the first of its request's


def paged_queries(
    requests: list[int],
    q_rows: list[int],
    seq_lens: list[int],
    *,
    page_table: torch.Tensor,
    page_size: int,
    num_tokens: int,
) -> PagedQueries:
    """The kernel's view of these query rows, checked against the page table once (not per layer)."""
    if not (len(requests) == len(q_rows) == len(seq_lens)) or min(seq_lens, default=0) < 1:
        raise ValueError(
            f"paged_queries needs one request, one q row and one key count >= 1 per row; got "
            f"{len(requests)}, {len(q_rows)} and {len(seq_lens)} (min key count {min(seq_lens, default=0)})"
        )
    if page_table.dtype != torch.int64 or page_table.dim() != 2:
        raise ValueError(
            f"paged_queries takes an int64 page table [requests, pages]; got {page_table.dtype} "
            f"{tuple(page_table.shape)}"
        )
    rows, width = page_table.shape
    if (
        max(requests) >= rows
        or max(q_rows) >= num_tokens
        or max(seq_lens) > width * page_size
        or min(requests + q_rows) < 0
    ):
        raise ValueError(
            f"query rows out of range: requests {min(requests)}-{max(requests)} of {rows}, q rows "
            f"{min(q_rows)}-{max(q_rows)} of {num_tokens}, longest {max(seq_lens)} keys in a table of "
            f"{width} pages of {page_size}"
        )
    as_tensor = functools.partial(torch.tensor, dtype=torch.int64)
    # The spare column keeps the table at least two wide: torch.compile specializes a graph on any
    # dimension of size 1, and a one-page table would then recompile the traced step at its second page.
    spare = torch.nn.functional.pad(page_table, (0, 1))
    return PagedQueries(spare, page_size, as_tensor(requests), as_tensor(q_rows), as_tensor(seq_lens))


@functools.cache
def _library() -> ctypes.CDLL:
    """The kernel, loaded once per process (built on first use on this machine)."""
    library = load_library(SOURCE, FLAGS, package="attn-backends", what=WHAT)
    i64, pointer = ctypes.c_int64, ctypes.c_void_p
    for entry in _ENTRY_OF_DTYPES.values():
        getattr(library, entry).argtypes = [pointer] * 7 + [i64] * 11 + [ctypes.c_double, pointer]
        getattr(library, entry).restype = None
        native = getattr(library, entry.replace("paged_attention", "paged_attention_native"))
        native.argtypes = [pointer, pointer, i64, i64, pointer, pointer] + [i64] * 5 + [ctypes.c_double, i64, pointer]
        native.restype = None
    library.paged_attention_bf16_on_tiles.argtypes = [i64, i64]
    library.paged_attention_bf16_on_tiles.restype = ctypes.c_int
    return library


def bf16_on_tiles(head_dim: int, group: int) -> bool:
    """Whether bf16 rows with this head size and `group` query heads per KV head are scored on AMX
    tiles in this process (a CPU with them, which Linux grants), rather than by the vector walk."""
    return bool(_library().paged_attention_bf16_on_tiles(head_dim, group))


class PagedPlan(ctypes.Structure):
    """PagedQueries as the native entry reads them (paged_attention_kernel.cpp's PagedPlan)."""

    _fields_ = [
        ("page_table", ctypes.c_void_p),
        ("request_of", ctypes.c_void_p),
        ("q_row_of", ctypes.c_void_p),
        ("seq_len_of", ctypes.c_void_p),
        ("rows", ctypes.c_int64),
        ("page_size", ctypes.c_int64),
        ("page_table_stride", ctypes.c_int64),
    ]


@dataclass(frozen=True)
class NativePagedAttention:
    """The native entry of one forward's planned rows, holding what its plan points into."""

    queries: PagedQueries
    plan: PagedPlan
    native: NativeAttention


def native_paged_attention(queries: PagedQueries, dtype: torch.dtype, kv_dtype: torch.dtype) -> NativePagedAttention:
    """The native attention ABI's entry for `queries` with q in `dtype` over pools in `kv_dtype`
    (native_attention.py)."""
    if (dtype, kv_dtype) not in _ENTRY_OF_DTYPES:
        raise TypeError(f"paged_attention takes {_accepted_dtypes()}; got q {dtype} with pools {kv_dtype}")
    plan = PagedPlan(
        queries.page_table.data_ptr(),
        queries.requests.data_ptr(),
        queries.q_rows.data_ptr(),
        queries.seq_lens.data_ptr(),
        queries.seq_lens.shape[0],
        queries.page_size,
        queries.page_table.stride(0),
    )
    entry = getattr(_library(), _ENTRY_OF_DTYPES[dtype, kv_dtype].replace("paged_attention", "paged_attention_native"))
    address = ctypes.cast(entry, ctypes.c_void_p).value
    assert address is not None  # a loaded library's function has one
    return NativePagedAttention(queries, plan, NativeAttention(address, ctypes.addressof(plan)))


def _check(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    rows: tuple[torch.Tensor, ...],
) -> None:
    """Refuse what the kernel cannot read: it indexes raw memory. (The page ids themselves are the
    caller's to bound, as the runner does when it refuses a table naming pages outside its pool.)"""
    if any(r.dtype != torch.int64 or r.dim() != 1 or r.stride(0) != 1 or r.shape != rows[0].shape for r in rows):
        raise ValueError(
            "paged_attention takes requests, q_rows and seq_lens as contiguous int64 vectors of one length; "
            f"got {[(r.dtype, tuple(r.shape)) for r in rows]}"
        )
    if (q.dtype, k_cache.dtype) not in _ENTRY_OF_DTYPES or k_cache.dtype != v_cache.dtype:
        raise TypeError(
            f"paged_attention takes {_accepted_dtypes()}; got q {q.dtype}, k {k_cache.dtype}, v {v_cache.dtype}"
        )
    if not q.device.type == k_cache.device.type == v_cache.device.type == page_table.device.type == "cpu":
        raise ValueError(f"paged_attention runs on CPU tensors; got q on {q.device}, pools on {k_cache.device}")
    if q.dim() != 3 or k_cache.dim() != 3 or k_cache.shape != v_cache.shape or k_cache.stride() != v_cache.stride():
        raise ValueError(
            f"paged_attention takes q [tokens, heads, d] and two alike pools [kv_heads, slots, d]; "
            f"got q {tuple(q.shape)}, k {tuple(k_cache.shape)}, v {tuple(v_cache.shape)}"
        )
    heads, head_dim, kv_heads = q.shape[1], q.shape[2], k_cache.shape[0]
    if k_cache.shape[2] != head_dim or heads % kv_heads or q.stride(2) != 1 or k_cache.stride(2) != 1:
        raise ValueError(
            f"paged_attention needs heads ({heads}) a multiple of kv_heads ({kv_heads}), one head_dim "
            f"(q {head_dim}, pool {k_cache.shape[2]}) and rows contiguous in it"
        )
    if page_table.dtype != torch.int64 or page_table.dim() != 2 or page_table.stride(1) != 1:
        raise ValueError(
            f"paged_attention takes an int64 page table [requests, pages] with contiguous rows; got "
            f"{page_table.dtype} {tuple(page_table.shape)}"
        )


def paged_attention(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, queries: PagedQueries, scale: float
) -> torch.Tensor:
    """Attention of each of `queries`' rows of q [tokens, heads, d] over its keys in the pools
    [kv_heads, slots, d]; answers [rows, heads, d] in the order of `queries`."""
    out: torch.Tensor = torch.ops.attn_backends.paged_attention(
        q,
        k_cache,
        v_cache,
        queries.page_table,
        queries.requests,
        queries.q_rows,
        queries.seq_lens,
        queries.page_size,
        scale,
    )
    return out


@torch.library.custom_op("attn_backends::paged_attention", mutates_args=())
def _paged_attention_op(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    requests: torch.Tensor,
    q_rows: torch.Tensor,
    seq_lens: torch.Tensor,
    page_size: int,
    scale: float,
) -> torch.Tensor:
    _check(q, k_cache, v_cache, page_table, (requests, q_rows, seq_lens))
    rows = seq_lens.shape[0]
    out = q.new_empty(rows, q.shape[1], q.shape[2])
    getattr(_library(), _ENTRY_OF_DTYPES[q.dtype, k_cache.dtype])(
        q.data_ptr(),
        k_cache.data_ptr(),
        v_cache.data_ptr(),
        page_table.data_ptr(),
        requests.data_ptr(),
        q_rows.data_ptr(),
        seq_lens.data_ptr(),
        rows,
        torch.get_num_threads(),
        q.shape[1],
        k_cache.shape[0],
        q.shape[2],
        page_size,
        q.stride(0),
        q.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        page_table.stride(0),
        scale,
        out.data_ptr(),
    )
    return out


@_paged_attention_op.register_fake
def _(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    requests: torch.Tensor,
    q_rows: torch.Tensor,
    seq_lens: torch.Tensor,
    page_size: int,
    scale: float,
) -> torch.Tensor:
    return q.new_empty(seq_lens.shape[0], q.shape[1], q.shape[2])
