"""torch_native: attention over each request's pages in torch ops, on any device.

A batch is split by what each request computes. Requests with one new token (decodes, wherever
they sit in the batch) run together as two batched matmuls over their keys gathered a page at a
time, in chunks sized to each request's own length when lengths are spread (decode_plan).
Requests with several new tokens (extends) run one SDPA call each over their own keys, causal by
SDPA's own flag when nothing is cached before them, else under a mask that keeps a query at
position p to keys 0..p. Outputs go back in batch order.

Prompt tokens on SDPA are why `auto` builds torch_native for a CPU's prefill half, though the
C++ kernel (cpu_paged) can attend them causally: measured, a prompt's attention ran 1.5-1.9x
faster there but a mixed step only about 5% faster, and its rounding (fp32 throughout) differs
from the SDPA rounding transformers shares. On the README's question, measured on an
AVX512-BF16 machine, that was enough to change the answer: the default model's likeliest first
token led the next by one bf16 step (25.625 to 25.5) with SDPA and tied it, and lost, with the
kernel. (On an AVX2 machine, whose kernel path rounds otherwise, both answer the same; there the
kernel is also half as fast as SDPA on prompts, docs/benchmarks.md.)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from attn_backends.backend import AttentionBackend
from attn_backends.kernels.decode_attention import decode_attention
from attn_backends.kernels.decode_plan import DecodeGroup, decode_group
from attn_backends.kernels.gather_workspace import GatherWorkspace
from attn_backends.metadata import AttentionMetadataView


@dataclass(frozen=True)
class ExtendRequest:
    """One multi-token request of a forward, attended alone."""

    start: int  # its first token's row in the batch
    length: int  # its new tokens
    kv_slots: torch.Tensor  # [seq_len]: pool slot of each of its keys
    mask: torch.Tensor | None  # [length, seq_len]: keys each query sees; None when causal from position 0


@dataclass(frozen=True)
class GatherPlan:
    """Index tensors of one forward, shared by every layer."""

    num_tokens: int
    decode: DecodeGroup | None  # the decodes, gathered together
    extends: tuple[ExtendRequest, ...]


class TorchNativeBackend(AttentionBackend):
    """Attention over the pool's pages: decodes gathered together, each extend causal over its own keys."""

    def __init__(self) -> None:
        self._plan: GatherPlan | None = None
        self._workspace = GatherWorkspace()

    def plan(self, metadata: AttentionMetadataView) -> None:
        """Compute the key slots, masks and batch rows of this forward."""
        page_size, page_table = metadata.page_size, metadata.page_table
        device = page_table.device
        # One host copy per forward (the runner built these from host ints); every layer reuses the plan.
        extend_lens: list[int] = metadata.extend_lens.tolist()
        prefix_lens: list[int] = metadata.prefix_lens.tolist()
        starts, at = [], 0
        for length in extend_lens:
            starts.append(at)
            at += length
        decodes = [r for r, length in enumerate(extend_lens) if length == 1]
        decode = None
        if decodes:
            everything = len(decodes) == len(extend_lens)
            table = page_table if everything else page_table.index_select(0, torch.tensor(decodes, device=device))
            rows = None if everything else torch.tensor([starts[r] for r in decodes], device=device)
            decode = decode_group(page_size, table, [prefix_lens[r] + 1 for r in decodes], rows)
        in_page = torch.arange(page_size, device=device)
        extends = []
        for r, length in enumerate(extend_lens):
            if length == 1:
                continue
            prefix = prefix_lens[r]
            seq = prefix + length
            pages = page_table[r, : -(-seq // page_size)]
            slots = (pages[:, None] * page_size + in_page[None, :]).reshape(-1)[:seq]
            mask = None
            if prefix:
                key_pos = torch.arange(seq, device=device)
                mask = key_pos[None, :] <= key_pos[prefix:, None]
            extends.append(ExtendRequest(starts[r], length, slots, mask))
        self._plan = GatherPlan(metadata.num_tokens, decode, tuple(extends))

    def attend(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *, scale: float) -> torch.Tensor:
        """Attention of the planned forward for one layer."""
        plan = self._plan
        if plan is None:
            raise RuntimeError("attend() was called before plan(); plan each forward first")
        decode = plan.decode
        if decode is not None and decode.token_rows is None:
            return decode_attention(q, k_cache, v_cache, decode, scale, self._workspace)
        if decode is None and len(plan.extends) == 1:
            return _extend_attention(q, k_cache, v_cache, plan.extends[0], scale)
        out = q.new_empty(plan.num_tokens, q.shape[1], q.shape[2])
        if decode is not None and decode.token_rows is not None:
            decoded = decode_attention(
                q.index_select(0, decode.token_rows), k_cache, v_cache, decode, scale, self._workspace
            )
            out.index_copy_(0, decode.token_rows, decoded)
        for request in plan.extends:
            out[request.start : request.start + request.length] = _extend_attention(q, k_cache, v_cache, request, scale)
        return out


def _extend_attention(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, request: ExtendRequest, scale: float
) -> torch.Tensor:
    """One request's new tokens [length, heads, d] against its own keys, causally."""
    heads, kv_heads = q.shape[1], k_cache.shape[0]
    rows = q[request.start : request.start + request.length].transpose(0, 1)[None]
    k = k_cache.index_select(1, request.kv_slots)[None]
    v = v_cache.index_select(1, request.kv_slots)[None]
    out = F.scaled_dot_product_attention(
        rows, k, v, attn_mask=request.mask, is_causal=request.mask is None, scale=scale, enable_gqa=heads != kv_heads
    )
    return out[0].transpose(0, 1)
