"""torch_native: attention over each request's gathered pages in plain torch (CPU and GPU).

Requests are padded to the longest one. Extend runs one SDPA call whose boolean mask keeps each
query to its own request's keys, causally (a query at position p sees keys 0..p); decode runs two
batched matmuls under a length mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from attn_backends.backend import AttentionBackend
from attn_backends.metadata import AttentionMetadataView


@dataclass(frozen=True)
class GatherPlan:
    """Index tensors of one forward, shared by every layer."""

    kv_slots: torch.Tensor  # [requests * max_seq_len]: pool slot of each key position (0 past the end)
    mask: torch.Tensor  # [requests, 1, max_extend_len, max_seq_len]: which keys each query sees (decode: which it does not)
    query_pad_source: torch.Tensor | None  # [requests * max_extend_len]: token feeding each padded query row
    token_pad_row: torch.Tensor | None  # [tokens]: padded row holding each token's output
    max_extend_len: int


class TorchNativeBackend(AttentionBackend):
    """Attention over gathered pages; causal for extend, a plain length mask for decode."""

    def __init__(self) -> None:
        self._plan: GatherPlan | None = None

    def plan(self, metadata: AttentionMetadataView) -> None:
        """Compute the key slots, masks and padding maps of this forward."""
        page_size = metadata.page_size
        page_table = metadata.page_table
        device = page_table.device
        requests = page_table.shape[0]
        max_seq, max_ext = metadata.max_seq_len, metadata.max_extend_len
        key_pos = torch.arange(max_seq, device=device)
        page_index = (key_pos // page_size).clamp(max=page_table.shape[1] - 1).expand(requests, max_seq)
        slots = page_table.gather(1, page_index) * page_size + key_pos % page_size
        key_valid = key_pos[None, :] < metadata.seq_lens[:, None]
        slots = torch.where(key_valid, slots, 0)
        if max_ext == 1:
            self._plan = GatherPlan(slots.reshape(-1), ~key_valid[:, None, None, :], None, None, 1)
            return
        query_off = torch.arange(max_ext, device=device)
        query_valid = query_off[None, :] < metadata.extend_lens[:, None]
        query_pos = metadata.prefix_lens[:, None] + query_off[None, :]
        mask = key_valid[:, None, :] & (key_pos[None, None, :] <= query_pos[:, :, None])
        # A padded query row must see one key, or SDPA fills it with NaN; its output is dropped.
        mask |= (~query_valid)[:, :, None] & (key_pos == 0)[None, None, :]
        starts = torch.cumsum(metadata.extend_lens, 0) - metadata.extend_lens
        pad_source = torch.where(query_valid, starts[:, None] + query_off[None, :], 0).reshape(-1)
        owner = torch.repeat_interleave(torch.arange(requests, device=device), metadata.extend_lens, output_size=metadata.num_tokens)
        offset = torch.arange(metadata.num_tokens, device=device) - starts[owner]
        self._plan = GatherPlan(slots.reshape(-1), mask[:, None], pad_source, owner * max_ext + offset, max_ext)

    def attend(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *, scale: float) -> torch.Tensor:
        """Attention of the planned forward for one layer."""
        plan = self._plan
        if plan is None:
            raise RuntimeError("attend() was called before plan(); plan each forward first")
        heads, head_dim = q.shape[1], q.shape[2]
        # index_select, not advanced indexing: about ten times faster on CPU for this gather.
        requests, kv_heads = plan.mask.shape[0], k_cache.shape[0]
        k = k_cache.index_select(1, plan.kv_slots).view(kv_heads, requests, -1, head_dim)
        v = v_cache.index_select(1, plan.kv_slots).view(kv_heads, requests, -1, head_dim)
        if plan.query_pad_source is None or plan.token_pad_row is None:
            return _decode_attention(q, k, v, plan.mask, scale)
        q_pad = q.index_select(0, plan.query_pad_source).view(-1, plan.max_extend_len, heads, head_dim).transpose(1, 2)
        out = F.scaled_dot_product_attention(q_pad, k.transpose(0, 1), v.transpose(0, 1), attn_mask=plan.mask, scale=scale,
                                             enable_gqa=heads != kv_heads)
        return out.transpose(1, 2).reshape(-1, heads, head_dim).index_select(0, plan.token_pad_row)


def _decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, hidden: torch.Tensor, scale: float) -> torch.Tensor:
    """One query per request: q [requests, heads, d] against k/v [kv_heads, requests, keys, d];
    `hidden` [requests, 1, 1, keys] marks the keys past each request's length.

    Two batched matmuls with the query heads grouped under their KV head; on CPU this beats SDPA's
    masked path several times over at decode shapes. The softmax runs in fp32.
    """
    requests, heads, head_dim = q.shape
    kv_heads = k.shape[0]
    grouped = (q * scale).view(requests, kv_heads, heads // kv_heads, head_dim).transpose(0, 1)
    scores = torch.matmul(grouped, k.transpose(-1, -2)).masked_fill_(hidden.transpose(0, 1), float("-inf"))
    weights = scores.softmax(-1, dtype=torch.float32).to(v.dtype)
    return torch.matmul(weights, v).transpose(0, 1).reshape(requests, heads, head_dim)
