"""Gated-DeltaNet's depthwise causal conv1d with a per-request state, in pure torch (torch_native).

Channel c of token t is SiLU(bias[c] + sum_j weight[c, j] * x[t - (W-1) + j, c]): each output sees
its own input and the W-1 before it. A request's conv state [C, W-1] holds the W-1 inputs before
its next token, oldest first (the layout of transformers' conv states, less the one column they
also keep). A sequence starts from its slot's state (a continuation) or from zeros (a fresh
prompt); after it, the slot holds its last W-1 inputs, the state's older columns included when it
is shorter than W-1. Arithmetic runs in fp32; y comes back in x's dtype and states are stored in
the pool's dtype.

Sequences of a varlen batch run together: each is laid out as [state, its tokens, zeros] and one
grouped conv1d covers the whole batch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attn_backends.linear.varlen_layout import (
    VarlenLayout,
    check_batch_rows,
    check_one_device,
    padded,
    unpadded,
    varlen_layout,
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
    """The conv over a varlen batch of prompts (or prompt chunks): x [T, C], weight [C, W],
    bias [C] or None, cu_seqlens int64 [B+1], conv_state the pool [S, C, W-1], slots int64 [B]
    (distinct), has_initial bool [B] (start from state[slot], else from zeros). Answers
    y [T, C] (SiLU applied) and writes each sequence's last W-1 inputs into conv_state[slots[b]]."""
    check_causal_conv_operands(x, weight, bias, conv_state, slots, cu_seqlens=cu_seqlens, has_initial=has_initial)
    layout = varlen_layout(cu_seqlens, x.shape[0])
    initial = torch.where(has_initial[:, None, None], conv_state[slots].float(), 0.0)
    windows = _windows(x, initial, layout)
    width = weight.shape[1]
    last = layout.lengths[:, None, None] + torch.arange(width - 1, device=x.device)  # the last W-1 columns of each row
    conv_state[slots] = windows.gather(2, last.expand(-1, x.shape[1], -1)).to(conv_state.dtype)
    return _conv(windows, weight, bias, layout).to(x.dtype)


def causal_conv_decode(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, conv_state: torch.Tensor, slots: torch.Tensor
) -> torch.Tensor:
    """One token per request: x [B, C], each request resuming from conv_state[slots[b]], which then
    drops its oldest input for this one (in place). Answers y [B, C] (SiLU applied)."""
    check_causal_conv_operands(x, weight, bias, conv_state, slots)
    window = torch.cat((conv_state[slots].float(), x.float()[:, :, None]), dim=2)  # [B, C, W]
    conv_state[slots] = window[:, :, 1:].to(conv_state.dtype)
    y = (window * weight.float()).sum(-1)
    if bias is not None:
        y = y + bias.float()
    return F.silu(y).to(x.dtype)


def causal_conv_verify(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    cu_seqlens: torch.Tensor,
    conv_state: torch.Tensor,
    slots: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A speculative verify: each request's draft tokens (packed as for prefill) run from
    conv_state[slots[b]], which stays untouched. Answers (y [T, C], windows [T, C, W-1] in the
    pool's dtype): windows[t] is the conv state after token t, for the caller to commit."""
    check_causal_conv_operands(x, weight, bias, conv_state, slots, cu_seqlens=cu_seqlens)
    layout = varlen_layout(cu_seqlens, x.shape[0])
    windows = _windows(x, conv_state[slots].float(), layout)
    width = weight.shape[1]
    after = windows.unfold(2, width - 1, 1)[:, :, 1:]  # [B, C, L, W-1]: the state after each position
    return _conv(windows, weight, bias, layout).to(x.dtype), unpadded(after.transpose(1, 2), layout).to(
        conv_state.dtype
    )


def check_causal_conv_operands(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    conv_state: torch.Tensor,
    slots: torch.Tensor,
    *,
    cu_seqlens: torch.Tensor | None = None,
    has_initial: torch.Tensor | None = None,
) -> None:
    """Refuse operands the conv kernels (torch and triton) cannot take, naming what they take.
    Without cu_seqlens every row of x is its own request (decode). Reads nothing on the host."""
    if x.dim() != 2 or not x.is_floating_point():
        raise ValueError(f"x must be a floating-point [T, C]; got {x.dtype} of shape {tuple(x.shape)}")
    channels = x.shape[1]
    if weight.dim() != 2 or weight.shape[0] != channels or weight.shape[1] < 2:
        raise ValueError(
            f"weight must be [C, W] = [{channels}, W] with a width W >= 2 (squeeze conv1d's [C, 1, W]); "
            f"got {tuple(weight.shape)}"
        )
    if bias is not None and bias.shape != (channels,):
        raise ValueError(f"bias must be [C] = [{channels}] or None; got {tuple(bias.shape)}")
    width = weight.shape[1]
    if (
        conv_state.dim() != 3
        or tuple(conv_state.shape[1:]) != (channels, width - 1)
        or not conv_state.is_floating_point()
    ):
        raise ValueError(
            f"conv_state must be the floating-point pool [slots, C, W-1] = [S, {channels}, {width - 1}]; "
            f"got {conv_state.dtype} of shape {tuple(conv_state.shape)}"
        )
    check_batch_rows(x.shape[0], slots, cu_seqlens, has_initial)
    check_one_device(x, weight, bias, conv_state, slots, cu_seqlens, has_initial)


def _windows(x: torch.Tensor, initial: torch.Tensor, layout: VarlenLayout) -> torch.Tensor:
    """Each sequence's inputs as one fp32 row per channel: [B, C, W-1 + longest] = its starting
    state, then its tokens, then zeros."""
    tokens = padded(x.float(), layout, layout.longest).transpose(1, 2)  # [B, C, longest]
    return torch.cat((initial, tokens), dim=2)


def _conv(windows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, layout: VarlenLayout) -> torch.Tensor:
    """SiLU of the depthwise conv over `windows`, back as packed [T, C] fp32."""
    y = F.conv1d(windows, weight.float()[:, None, :], None if bias is None else bias.float(), groups=weight.shape[0])
    return unpadded(F.silu(y).transpose(1, 2), layout)
