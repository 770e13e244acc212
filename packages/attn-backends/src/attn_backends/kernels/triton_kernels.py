"""Triton kernels of the triton backend: causal attention over the paged pool, for extends and decodes.

Both kernels walk a request's keys in blocks of whole pages: a key block is BLOCK_PAGES pages of
PAGE_SIZE slots (BLOCK_N = BLOCK_PAGES * PAGE_SIZE keys, at least one page, so BLOCK_N grows past
the chosen block size for large pages: 128 keys at page size 128). Per block the kernel loads the
block's BLOCK_PAGES page ids from the request's page-table row once (masked past the request's
last page) and addresses the keys as a [BLOCK_PAGES, PAGE_SIZE] tile,
`page_id[:, None] * PAGE_SIZE + tl.arange(0, PAGE_SIZE)[None, :]`, contiguous within each page,
reshaped (order kept) to BLOCK_N rows, so key i of the block is the block's first position + i.
Keys past the request's end (the tail of its last page) are masked by position. `tl.arange` takes
only powers of two, so PAGE_SIZE must be one: the launches refuse any other page size (the config
rule `attention_page_size` refuses it earlier, from the bags). Every load is upcast to fp32 and all
arithmetic (scores, the online softmax, the weighted sum of values) runs in fp32; the output is
cast to q's dtype on the store. fp32 because bf16 arithmetic and bf16 `tl.dot` give garbage in
Triton's interpreter, where the CPU tests run.

Extend kernel: one program per (block of up to EXTEND_BLOCK_M query tokens of one request, kv head).
Its tile's rows are (token, query head of that kv head's group) pairs, heads fastest, so a key block
is loaded once for the whole GQA group rather than once per query head, and the tile has at least
16 rows: `tl.dot` applies to both products (scores = q k^T, then p v) with key blocks of about
EXTEND_BLOCK_N (32) keys. The program walks the request's pages from position 0 up to its last
token's position, masking keys past each row's own position (causal by position, which also covers
a cached prefix) and keeps the online softmax (running max, running sum, rescaled accumulator; exp2
with the scale folded into q). The plan lists the blocks, so the grid holds only blocks with work
(a mixed batch of many decodes and one long prompt does not pay for requests x longest-extend
programs); a one-token request is one block with one valid row.

Decode kernel: every request has one new token. One program per (request, kv head); its tile is the
group's query heads [BLOCK_H, head_dim], usually fewer than 16 rows, so scores and the value sum are
element-wise products reduced with `tl.sum` instead of `tl.dot`. The key block is sized so a
[BLOCK_H, BLOCK_N, head_dim] product stays about 8K elements (register pressure on a GPU) when a
page is no larger than that block; a larger page is one block, and the product grows with it.

On a GPU fp32 `tl.dot` rounds its inputs to tf32 by default; the launch asks for exact ("ieee")
products when the inputs are fp32 and keeps tf32 for fp16/bf16 inputs: tf32 holds their values
exactly, and it rounds the probabilities no coarser than the fp16/bf16 output is rounded.
Block sizes and warp counts are first choices, not tuned on a GPU.

The key loops are `while` loops, not `for ... in range(0, pages, BLOCK_PAGES)`: Triton 3.6's
interpreter turns a loaded length into a Python int with `int()` of a one-element array, which
numpy >= 2.4 refuses (triton-lang/triton#9171). On a GPU a `while` loop forgoes the software
pipelining (prefetching the next key block) that Triton applies to `for` loops.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

EXTEND_BLOCK_M = 16  # query tokens of one request per extend program
EXTEND_BLOCK_N = 32  # keys per step of the extend kernel's loop, rounded to whole pages (at least one)
_LOG2_E = 1.4426950408889634  # the softmax runs on exp2: exp(x) = exp2(x * log2(e))


@triton.jit  # type: ignore[untyped-decorator]  # triton ships no types
def _extend_kernel(
    q_ptr: tl.tensor,
    k_ptr: tl.tensor,
    v_ptr: tl.tensor,
    out_ptr: tl.tensor,
    page_table_ptr: tl.tensor,
    blocks_ptr: tl.tensor,
    qk_scale: tl.float32,
    stride_qt: tl.int64,
    stride_qh: tl.int64,
    stride_kh: tl.int64,
    stride_ks: tl.int64,
    stride_vh: tl.int64,
    stride_vs: tl.int64,
    stride_ot: tl.int64,
    stride_oh: tl.int64,
    stride_pt: tl.int64,
    GROUP: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_PAGES: tl.constexpr,
    PRECISION: tl.constexpr,
) -> None:
    BLOCK_N: tl.constexpr = BLOCK_PAGES * PAGE_SIZE  # keys per block; annotated, or the interpreter makes it a tensor
    block = tl.program_id(0)
    kv_head = tl.program_id(1).to(tl.int64)
    # The plan's row of this block: its request, the batch row and position of its first token, its token count.
    request = tl.load(blocks_ptr + block * 4).to(tl.int64)
    first_row = tl.load(blocks_ptr + block * 4 + 1).to(tl.int64)
    first_pos = tl.load(blocks_ptr + block * 4 + 2)
    tokens = tl.load(blocks_ptr + block * 4 + 3)

    rows = tl.arange(0, BLOCK_ROWS)
    token = rows // BLOCK_H
    in_group = rows % BLOCK_H
    row_ok = (token < tokens) & (in_group < GROUP)
    q_pos = first_pos + token
    head = kv_head * GROUP + in_group
    dims = tl.arange(0, HEAD_DIM)
    q = (
        tl.load(
            q_ptr + (first_row + token)[:, None] * stride_qt + head[:, None] * stride_qh + dims[None, :],
            mask=row_ok[:, None],
            other=0.0,
        ).to(tl.float32)
        * qk_scale
    )

    m_i = tl.full([BLOCK_ROWS], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_ROWS], tl.float32)
    acc = tl.zeros([BLOCK_ROWS, HEAD_DIM], tl.float32)
    # Causal: no row of the block sees past its last token. Every row (padding too) sees key 0, so no row's max
    # stays -inf.
    kv_end = first_pos + tokens
    pages = tl.cdiv(kv_end, PAGE_SIZE)
    in_page = tl.arange(0, PAGE_SIZE)
    first_page = 0
    while first_page < pages:  # not `for ... range`: see the module docstring
        page = first_page + tl.arange(0, BLOCK_PAGES)
        page_id = tl.load(page_table_ptr + request * stride_pt + page, mask=page < pages, other=0)
        slot = tl.reshape(page_id[:, None] * PAGE_SIZE + in_page[None, :], [BLOCK_N])
        pos = first_page * PAGE_SIZE + tl.arange(0, BLOCK_N)  # the tile's row-major order, which reshape keeps
        key_ok = pos < kv_end
        k = tl.load(
            k_ptr + kv_head * stride_kh + slot[:, None] * stride_ks + dims[None, :], mask=key_ok[:, None], other=0.0
        ).to(tl.float32)
        v = tl.load(
            v_ptr + kv_head * stride_vh + slot[:, None] * stride_vs + dims[None, :], mask=key_ok[:, None], other=0.0
        ).to(tl.float32)
        scores = tl.dot(q, tl.trans(k), input_precision=PRECISION)
        visible = (pos[None, :] <= q_pos[:, None]) & key_ok[None, :]
        scores = tl.where(visible, scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision=PRECISION)
        m_i = m_new
        first_page += BLOCK_PAGES

    out = acc / l_i[:, None]
    tl.store(
        out_ptr + (first_row + token)[:, None] * stride_ot + head[:, None] * stride_oh + dims[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=row_ok[:, None],
    )


@triton.jit  # type: ignore[untyped-decorator]  # triton ships no types
def _decode_kernel(
    q_ptr: tl.tensor,
    k_ptr: tl.tensor,
    v_ptr: tl.tensor,
    out_ptr: tl.tensor,
    page_table_ptr: tl.tensor,
    seq_lens_ptr: tl.tensor,
    qk_scale: tl.float32,
    stride_qt: tl.int64,
    stride_qh: tl.int64,
    stride_kh: tl.int64,
    stride_ks: tl.int64,
    stride_vh: tl.int64,
    stride_vs: tl.int64,
    stride_ot: tl.int64,
    stride_oh: tl.int64,
    stride_pt: tl.int64,
    GROUP: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_PAGES: tl.constexpr,
) -> None:
    BLOCK_N: tl.constexpr = BLOCK_PAGES * PAGE_SIZE  # keys per block; annotated, or the interpreter makes it a tensor
    request = tl.program_id(0).to(tl.int64)  # also its token's batch row: every request has one new token
    kv_head = tl.program_id(1).to(tl.int64)
    seq = tl.load(seq_lens_ptr + request)

    in_group = tl.arange(0, BLOCK_H)
    head_ok = in_group < GROUP
    head = kv_head * GROUP + in_group
    dims = tl.arange(0, HEAD_DIM)
    q = (
        tl.load(
            q_ptr + request * stride_qt + head[:, None] * stride_qh + dims[None, :], mask=head_ok[:, None], other=0.0
        ).to(tl.float32)
        * qk_scale
    )

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, HEAD_DIM], tl.float32)
    pages = tl.cdiv(seq, PAGE_SIZE)
    in_page = tl.arange(0, PAGE_SIZE)
    first_page = 0
    while first_page < pages:
        page = first_page + tl.arange(0, BLOCK_PAGES)
        page_id = tl.load(page_table_ptr + request * stride_pt + page, mask=page < pages, other=0)
        slot = tl.reshape(page_id[:, None] * PAGE_SIZE + in_page[None, :], [BLOCK_N])
        pos = first_page * PAGE_SIZE + tl.arange(0, BLOCK_N)
        key_ok = pos < seq
        k = tl.load(
            k_ptr + kv_head * stride_kh + slot[:, None] * stride_ks + dims[None, :], mask=key_ok[:, None], other=0.0
        ).to(tl.float32)
        v = tl.load(
            v_ptr + kv_head * stride_vh + slot[:, None] * stride_vs + dims[None, :], mask=key_ok[:, None], other=0.0
        ).to(tl.float32)
        scores = tl.sum(q[:, None, :] * k[None, :, :], 2)
        scores = tl.where(key_ok[None, :], scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :], 1)
        m_i = m_new
        first_page += BLOCK_PAGES

    out = acc / l_i[:, None]
    tl.store(
        out_ptr + request * stride_ot + head[:, None] * stride_oh + dims[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=head_ok[:, None],
    )


# Read when the kernels above were decorated: whether they run in Triton's interpreter (on CPU tensors).
INTERPRETED: bool = bool(triton.knobs.runtime.interpret)


def launch_extend(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    blocks: torch.Tensor,
    page_size: int,
    scale: float,
) -> torch.Tensor:
    """Causal attention of q [tokens, heads, d] over the pool, one program per row of `blocks`
    ([n, 4] int32: request, first batch row, first position, token count) and kv head."""
    group = _check_operands(q, k_cache, v_cache)
    _check_page_size(page_size)
    out = torch.empty_like(q)
    block_h = triton.next_power_of_2(group)
    rows, dim = EXTEND_BLOCK_M * block_h, q.shape[2]
    _extend_kernel[(blocks.shape[0], k_cache.shape[0])](
        q,
        k_cache,
        v_cache,
        out,
        page_table,
        blocks,
        scale * _LOG2_E,
        q.stride(0),
        q.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        v_cache.stride(0),
        v_cache.stride(1),
        out.stride(0),
        out.stride(1),
        page_table.stride(0),
        GROUP=group,
        PAGE_SIZE=page_size,
        HEAD_DIM=dim,
        BLOCK_H=block_h,
        BLOCK_ROWS=rows,
        BLOCK_PAGES=_block_pages(EXTEND_BLOCK_N, page_size),
        PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        num_warps=8 if rows * dim > 8192 else 4,
    )
    return out


def launch_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    seq_lens: torch.Tensor,
    page_size: int,
    scale: float,
) -> torch.Tensor:
    """Attention of one new token per request (q [requests, heads, d]) over the first seq_lens[r]
    keys of each request, one program per request and kv head."""
    group = _check_operands(q, k_cache, v_cache)
    _check_page_size(page_size)
    out = torch.empty_like(q)
    block_h = triton.next_power_of_2(group)
    dim = q.shape[2]
    block_n = max(8, min(64, 8192 // (block_h * dim)))
    _decode_kernel[(q.shape[0], k_cache.shape[0])](
        q,
        k_cache,
        v_cache,
        out,
        page_table,
        seq_lens,
        scale * _LOG2_E,
        q.stride(0),
        q.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        v_cache.stride(0),
        v_cache.stride(1),
        out.stride(0),
        out.stride(1),
        page_table.stride(0),
        GROUP=group,
        PAGE_SIZE=page_size,
        HEAD_DIM=dim,
        BLOCK_H=block_h,
        BLOCK_PAGES=_block_pages(block_n, page_size),
    )
    return out


def _block_pages(keys: int, page_size: int) -> int:
    """Pages per key block: about `keys` keys (both powers of two), at least one page."""
    return max(1, keys // page_size)


def _check_page_size(page_size: int) -> None:
    """Refuse a page size the kernels cannot tile: a page is a `tl.arange(0, PAGE_SIZE)`."""
    if page_size < 1 or page_size & (page_size - 1):
        raise ValueError(
            f"triton tiles a page with tl.arange, which takes powers of two: page_size = {page_size}; "
            "use 1, 2, 4, 8, 16, ... or torch_native / cpu_paged"
        )


def _check_operands(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> int:
    """Refuse what the kernels cannot read; answers the GQA group size (query heads per kv head)."""
    dim = q.shape[2]
    if dim < 16 or dim > 256 or dim & (dim - 1):
        raise ValueError(
            f"the triton attention kernels take head_dim a power of two from 16 to 256, got {dim}; "
            "use torch_native for this model"
        )
    if k_cache.shape != v_cache.shape or k_cache.shape[2] != dim:
        raise ValueError(
            f"k_cache {tuple(k_cache.shape)} and v_cache {tuple(v_cache.shape)} must both be "
            f"[kv_heads, slots, {dim}] for q {tuple(q.shape)}"
        )
    heads, kv_heads = q.shape[1], k_cache.shape[0]
    if heads % kv_heads:
        raise ValueError(f"{heads} query heads are not a multiple of {kv_heads} kv heads")
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if t.stride(2) != 1:
            raise ValueError(f"{name} must be contiguous in head_dim (stride {t.stride(2)}); pass {name}.contiguous()")
    return heads // kv_heads
