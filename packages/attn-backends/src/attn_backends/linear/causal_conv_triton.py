"""Triton kernels of the causal conv with state (the gated delta rule is gated_delta_triton.py).

Same entry points, operands and results as the torch versions (causal_conv_state.py,
whose docstring holds the math); every load is upcast to fp32 and all
arithmetic runs in fp32, results are cast on the store. fp32 also because bf16 arithmetic and bf16
`tl.dot` give garbage in Triton's interpreter, where the CPU tests run. Every `tl.dot` asks for
exact fp32 products ("ieee"): the chunked rule solves a triangular system whose rounding the
state carries from chunk to chunk, and tf32 (10 mantissa bits) would show in it.

Causal conv (`_conv_kernel`), for all three: one program per (block of BLOCK_T tokens, block of
BLOCK_C channels). Each token finds its sequence (a per-token index built on the device), reads its
W inputs from x, or for positions before its sequence's start from the slot's conv state (zeros for
a fresh prompt), and also writes the W-1 inputs ending at itself: for every token into `windows`
(verify), or only for each sequence's last token into a [B, C, W-1] buffer that the launch then
copies into the pool's slots (prefill, decode) — after the kernel, so no program reads a state
another has already overwritten.

Block sizes and warp counts are first choices, not tuned on a GPU. The token loops are `while`
loops over loaded bounds, as in triton_kernels.py (Triton 3.6's interpreter fails on `range` over a
loaded length with numpy >= 2.4, triton-lang/triton#9171).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from attn_backends.linear.causal_conv_state import check_causal_conv_operands
from attn_backends.linear.triton_launch import check_pool

CONV_BLOCK_T = 16  # tokens per conv program
CONV_BLOCK_C = 128  # channels per conv program


@triton.jit  # type: ignore[untyped-decorator]  # triton ships no types
def _conv_input(
    x_ptr: tl.tensor,
    conv_state_ptr: tl.tensor,
    start: tl.tensor,
    slot: tl.tensor,
    resume: tl.tensor,
    position: tl.tensor,
    channels: tl.tensor,
    token_ok: tl.tensor,
    channel_ok: tl.tensor,
    C: tl.constexpr,
    W: tl.constexpr,
) -> tl.tensor:
    # The [tokens, channels] inputs at `position` of each token's sequence: from x at positions >= 0,
    # before the sequence's start from its slot's conv state (when resuming) or zeros.
    in_x = position >= 0
    from_x = (token_ok & in_x)[:, None] & channel_ok[None, :]
    from_state = (token_ok & ~in_x & resume)[:, None] & channel_ok[None, :]
    xs = tl.load(x_ptr + (start + position)[:, None] * C + channels[None, :], mask=from_x, other=0.0)
    column = (W - 1) + position  # position -1 is the state's newest column, W-2
    state = tl.load(
        conv_state_ptr + (slot[:, None] * C + channels[None, :]) * (W - 1) + column[:, None], mask=from_state, other=0.0
    )
    return xs.to(tl.float32) + state.to(tl.float32)


@triton.jit  # type: ignore[untyped-decorator]  # triton ships no types
def _conv_kernel(
    x_ptr: tl.tensor,
    weight_ptr: tl.tensor,
    bias_ptr: tl.tensor,
    y_ptr: tl.tensor,
    conv_state_ptr: tl.tensor,
    windows_ptr: tl.tensor,
    sequence_ptr: tl.tensor,
    cu_ptr: tl.tensor,
    slots_ptr: tl.tensor,
    has_initial_ptr: tl.tensor,
    T: tl.int64,
    C: tl.constexpr,
    W: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_C: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    HAS_FLAGS: tl.constexpr,
    EVERY_TOKEN: tl.constexpr,
) -> None:
    tokens = tl.program_id(0).to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)
    channels = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    token_ok = tokens < T
    channel_ok = channels < C
    seq = tl.load(sequence_ptr + tokens, mask=token_ok, other=0)
    start = tl.load(cu_ptr + seq, mask=token_ok, other=0).to(tl.int64)
    end = tl.load(cu_ptr + seq + 1, mask=token_ok, other=0).to(tl.int64)
    slot = tl.load(slots_ptr + seq, mask=token_ok, other=0).to(tl.int64)
    if HAS_FLAGS:
        resume = tl.load(has_initial_ptr + seq, mask=token_ok, other=0).to(tl.int1)
    else:
        resume = token_ok  # no flags: every request resumes (decode, verify)
    position = tokens - start

    acc = tl.zeros([BLOCK_T, BLOCK_C], tl.float32)
    for j in tl.static_range(W):
        inputs = _conv_input(
            x_ptr, conv_state_ptr, start, slot, resume, position + j - (W - 1), channels, token_ok, channel_ok, C, W
        )
        tap = tl.load(weight_ptr + channels * W + j, mask=channel_ok, other=0.0).to(tl.float32)
        acc += inputs * tap[None, :]
    if HAS_BIAS:
        acc += tl.load(bias_ptr + channels, mask=channel_ok, other=0.0).to(tl.float32)[None, :]
    y = acc * tl.sigmoid(acc)
    tile_ok = token_ok[:, None] & channel_ok[None, :]
    tl.store(y_ptr + tokens[:, None] * C + channels[None, :], y.to(y_ptr.dtype.element_ty), mask=tile_ok)

    # The conv state after each token: the W-1 inputs ending at it.
    if EVERY_TOKEN:
        window_row = tokens
        keep = tile_ok
    else:
        window_row = seq.to(tl.int64)
        keep = tile_ok & (tokens == end - 1)[:, None]
    for j in tl.static_range(W - 1):
        inputs = _conv_input(
            x_ptr, conv_state_ptr, start, slot, resume, position + 1 + j - (W - 1), channels, token_ok, channel_ok, C, W
        )
        tl.store(
            windows_ptr + (window_row[:, None] * C + channels[None, :]) * (W - 1) + j,
            inputs.to(windows_ptr.dtype.element_ty),
            mask=keep,
        )


def causal_conv_prefill(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    cu_seqlens: torch.Tensor,
    conv_state: torch.Tensor,
    slots: torch.Tensor,
    has_initial: torch.Tensor,
) -> torch.Tensor:
    """The conv over a varlen batch; operands and results as causal_conv_state.causal_conv_prefill.
    Reads nothing on the host."""
    check_causal_conv_operands(x, weight, bias, conv_state, slots, cu_seqlens=cu_seqlens, has_initial=has_initial)
    check_pool(conv_state, "conv_state")
    lengths = cu_seqlens[1:] - cu_seqlens[:-1]
    sequence = torch.repeat_interleave(torch.arange(slots.numel(), device=x.device), lengths, output_size=x.shape[0])
    # A sequence with no tokens has no last window: it keeps its starting state, as in torch_native.
    last = torch.where(has_initial[:, None, None], conv_state[slots], 0.0).to(conv_state.dtype)
    y = _launch_conv(x, weight, bias, conv_state, last, sequence, cu_seqlens, slots, has_initial, every_token=False)
    # After the kernel, which read the old states: each sequence's last window replaces its slot's state.
    conv_state[slots] = last
    return y


def causal_conv_decode(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, conv_state: torch.Tensor, slots: torch.Tensor
) -> torch.Tensor:
    """One token per request; operands and results as causal_conv_state.causal_conv_decode."""
    check_causal_conv_operands(x, weight, bias, conv_state, slots)
    check_pool(conv_state, "conv_state")
    requests = slots.numel()
    sequence = torch.arange(requests, device=x.device)
    cu_seqlens = torch.arange(requests + 1, device=x.device)
    last = conv_state.new_empty((requests, *conv_state.shape[1:]))
    y = _launch_conv(x, weight, bias, conv_state, last, sequence, cu_seqlens, slots, None, every_token=False)
    conv_state[slots] = last
    return y


def causal_conv_verify(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    cu_seqlens: torch.Tensor,
    conv_state: torch.Tensor,
    slots: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A speculative verify (conv_state untouched, the state after every token answered); operands
    and results as causal_conv_state.causal_conv_verify. Reads nothing on the host."""
    check_causal_conv_operands(x, weight, bias, conv_state, slots, cu_seqlens=cu_seqlens)
    check_pool(conv_state, "conv_state")
    lengths = cu_seqlens[1:] - cu_seqlens[:-1]
    sequence = torch.repeat_interleave(torch.arange(slots.numel(), device=x.device), lengths, output_size=x.shape[0])
    windows = conv_state.new_empty((x.shape[0], *conv_state.shape[1:]))
    y = _launch_conv(x, weight, bias, conv_state, windows, sequence, cu_seqlens, slots, None, every_token=True)
    return y, windows


def _launch_conv(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    conv_state: torch.Tensor,
    windows: torch.Tensor,
    sequence: torch.Tensor,
    cu_seqlens: torch.Tensor,
    slots: torch.Tensor,
    has_initial: torch.Tensor | None,
    *,
    every_token: bool,
) -> torch.Tensor:
    """The conv kernel over every token; answers y [T, C]. Without has_initial every request resumes."""
    tokens, channels = x.shape
    y = x.new_empty((tokens, channels))
    if tokens == 0:
        return y
    x, weight, sequence, cu_seqlens, slots = (t.contiguous() for t in (x, weight, sequence, cu_seqlens, slots))
    grid = (triton.cdiv(tokens, CONV_BLOCK_T), triton.cdiv(channels, CONV_BLOCK_C))
    # Pointers that a constexpr switch leaves unread still need a tensor: x stands in.
    _conv_kernel[grid](
        x,
        weight,
        x if bias is None else bias.contiguous(),
        y,
        conv_state,
        windows,
        sequence,
        cu_seqlens,
        slots,
        x if has_initial is None else has_initial.contiguous(),
        tokens,
        C=channels,
        W=weight.shape[1],
        BLOCK_T=CONV_BLOCK_T,
        BLOCK_C=CONV_BLOCK_C,
        HAS_BIAS=bias is not None,
        HAS_FLAGS=has_initial is not None,
        EVERY_TOKEN=every_token,
    )
    return y
