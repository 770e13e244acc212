"""Where each token of a packed (varlen) batch sits, and moving tokens to and from a padded batch.

A varlen batch packs its sequences along one token axis; `cu_seqlens` [B+1] holds where each
begins (cu_seqlens[b]) and ends (cu_seqlens[b + 1]). The torch linear-attention kernels compute
on a padded batch [B, L, ...] instead (one matmul per chunk for every sequence at once), with
zeros past each sequence's end: `padded` puts the tokens there and `unpadded` takes them back.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class VarlenLayout:
    """The sequences of a varlen batch of `tokens` tokens, and each token's place in them."""

    lengths: torch.Tensor  # [B] int64: tokens of each sequence
    sequence: torch.Tensor  # [T] int64: the sequence of each token
    position: torch.Tensor  # [T] int64: each token's position within its sequence
    longest: int  # tokens of the longest sequence (0 for an empty batch)


def varlen_layout(cu_seqlens: torch.Tensor, tokens: int) -> VarlenLayout:
    """The layout `cu_seqlens` describes over `tokens` packed tokens (checked as `checked_offsets`)."""
    offsets = checked_offsets(cu_seqlens, tokens)
    device = cu_seqlens.device
    starts = cu_seqlens[:-1].to(torch.int64)
    lengths = cu_seqlens[1:].to(torch.int64) - starts
    sequence = torch.repeat_interleave(torch.arange(lengths.numel(), device=device), lengths, output_size=tokens)
    position = torch.arange(tokens, device=device) - starts[sequence]
    longest = max((b - a for a, b in zip(offsets, offsets[1:], strict=False)), default=0)
    return VarlenLayout(lengths=lengths, sequence=sequence, position=position, longest=longest)


def checked_offsets(cu_seqlens: torch.Tensor, tokens: int) -> list[int]:
    """cu_seqlens read on the host (one sync); refuses offsets that do not start at 0, decrease,
    or end elsewhere than `tokens`."""
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 1 or cu_seqlens.dtype not in (torch.int32, torch.int64):
        raise ValueError(
            f"cu_seqlens must be a 1-D int64 (or int32) tensor of B+1 offsets, got "
            f"{cu_seqlens.dtype} of shape {tuple(cu_seqlens.shape)}"
        )
    offsets = [int(o) for o in cu_seqlens.tolist()]
    if offsets[0] != 0 or offsets[-1] != tokens or any(b < a for a, b in zip(offsets, offsets[1:], strict=False)):
        raise ValueError(f"cu_seqlens must rise from 0 to the {tokens} packed tokens, never decreasing; got {offsets}")
    return offsets


def check_batch_rows(
    tokens: int, slots: torch.Tensor, cu_seqlens: torch.Tensor | None, has_initial: torch.Tensor | None
) -> None:
    """Refuse a batch's per-request operands that do not fit its `tokens` packed tokens: slots
    [B] int64 (or int32), cu_seqlens [B+1] (None: a decode, one token per request), has_initial
    bool [B]. Reads nothing on the host."""
    requests = slots.numel()
    if slots.dim() != 1 or slots.dtype not in (torch.int32, torch.int64):
        raise ValueError(
            f"slots must be a 1-D int64 (or int32) tensor, one pool row per request; got "
            f"{slots.dtype} of shape {tuple(slots.shape)}"
        )
    if cu_seqlens is None:
        if requests != tokens:
            raise ValueError(f"a decode has one token per request: {tokens} tokens but {requests} slots")
    elif cu_seqlens.dim() != 1 or cu_seqlens.numel() != requests + 1:
        raise ValueError(
            f"cu_seqlens must hold B+1 = {requests + 1} offsets for {requests} slots; got shape "
            f"{tuple(cu_seqlens.shape)}"
        )
    if has_initial is not None and (has_initial.dtype != torch.bool or has_initial.shape != (requests,)):
        raise ValueError(
            f"has_initial must be a bool tensor [B] = [{requests}]; got {has_initial.dtype} of shape "
            f"{tuple(has_initial.shape)}"
        )


def check_one_device(*tensors: torch.Tensor | None) -> None:
    """Refuse operands spread over more than one device."""
    devices = {t.device for t in tensors if t is not None}
    if len(devices) > 1:
        raise ValueError(f"all operands must be on one device; got {sorted(str(d) for d in devices)}")


def padded(x: torch.Tensor, layout: VarlenLayout, length: int) -> torch.Tensor:
    """x [T, ...] as [B, length, ...]: each sequence's tokens from position 0, zeros after them."""
    out = x.new_zeros((layout.lengths.numel(), length, *x.shape[1:]))
    out[layout.sequence, layout.position] = x
    return out


def unpadded(x: torch.Tensor, layout: VarlenLayout) -> torch.Tensor:
    """x [B, L, ...] back as the packed [T, ...] (the inverse of `padded`)."""
    return x[layout.sequence, layout.position]
