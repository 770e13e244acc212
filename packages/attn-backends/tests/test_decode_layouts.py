"""Decodes grouped in the padded and the chunked layout (torch_native's decode path off the CPU, and
on it) equal per-request softmax attention, at page sizes 1 and 16,
alone and in mixed batches; the plan picks the layout the lengths call for."""

from __future__ import annotations

import math

import pytest
import torch
from paged_reference import paged_tensors, reference, scenario

from attn_backends import TorchNativeBackend
from attn_backends.kernels.decode_attention import decode_attention
from attn_backends.kernels.decode_plan import CHUNK_KEYS, chunked_decode_group, decode_group, padded_decode_group
from attn_backends.kernels.gather_workspace import GatherWorkspace

# Around and across chunk boundaries: one key, one short of a chunk, exactly one, one past, several.
RAGGED = [1, CHUNK_KEYS - 1, CHUNK_KEYS, CHUNK_KEYS + 1, 7, 3 * CHUNK_KEYS + 5, 40]
SPREAD = [20 + 29 * i for i in range(16)]  # 20..455: padding to the longest would waste about half


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("layout", [padded_decode_group, chunked_decode_group])
def test_each_layout_matches_per_request_softmax(page_size: int, layout: object) -> None:
    """Reverse-verified: dropping the key bias (a plain bmm, scaled) fails every case; pointing the
    grid's spare cells at chunk 0 instead of the masked spare fails the chunked cases, and so does
    offsetting the value bags by chunk index instead of key index; gathering from the pool viewed
    per slot instead of per page fails the page-size-16 cases; keeping the padded layout's page
    table slice uncontiguous fails its cases (the runner's table is as wide as the batch's longest)."""
    seq = RAGGED
    meta, slots = scenario([n - 1 for n in seq], [1] * len(seq), page_size, seed=page_size)
    q, k_cache, v_cache = paged_tensors(meta, heads=6, kv_heads=2, dim=16, dtype=torch.float64, seed=1)
    # A table wider than these requests need, as when a longer extend shares the batch.
    wide = torch.cat([meta.page_table, torch.zeros(len(seq), 3, dtype=torch.long)], 1)
    group = layout(page_size, wide, seq, None)  # type: ignore[operator]
    got = decode_attention(q, k_cache, v_cache, group, 1 / math.sqrt(16), GatherWorkspace())
    torch.testing.assert_close(got, reference(q, k_cache, v_cache, meta, slots, 1 / math.sqrt(16)))


def test_plan_picks_chunked_for_spread_lengths_padded_for_alike_and_one() -> None:
    """Reverse-verified: always answering the padded layout fails the first assertion; pooling the
    one-request group (the step the runner traces with torch.compile), or gathering it by whole
    pages under a mask, fails the last."""
    table = torch.arange(16 * 29).view(16, 29)
    spread = decode_group(16, table, SPREAD, None)
    assert spread.grid is not None and spread.pooled
    alike = decode_group(16, table, [448] * 16, None)
    assert alike.grid is None and alike.key_bias is None
    for length in (455, 448):  # the one-request plan has one shape whether or not a page is full
        one = decode_group(16, table[:1], [length], None)
        assert one.grid is None and one.key_bias is None and one.page_size == 1 and not one.pooled


@pytest.mark.parametrize("page_size", [1, 16])
def test_backend_mixed_batch_with_spread_decodes(page_size: int) -> None:
    """Spread decodes (chunked) between extends, one over a cached prefix, through the backend.

    Reverse-verified: writing the chunked decode rows back in grouped order instead of batch order fails."""
    prefix = [n - 1 for n in SPREAD[:6]] + [0, 50] + [n - 1 for n in SPREAD[6:]]
    extend = [1] * 6 + [9, 4] + [1] * 10
    meta, slots = scenario(prefix, extend, page_size, seed=7)
    decode_rows = torch.tensor([*range(6), *range(8, 18)])
    assert decode_group(page_size, meta.page_table.index_select(0, decode_rows), SPREAD, None).grid is not None
    q, k_cache, v_cache = paged_tensors(meta, heads=6, kv_heads=3, dim=8, dtype=torch.float64, seed=2)
    backend = TorchNativeBackend()
    backend.plan(meta)
    got = backend.attend(q, k_cache, v_cache, scale=0.3)
    torch.testing.assert_close(got, reference(q, k_cache, v_cache, meta, slots, 0.3))


def test_bf16_chunked_decode_stays_within_bf16_rounding() -> None:
    """32 requests of 100-420 keys in bf16 (the serving shape): the chunked result is as close to the
    exact answer as the old padded computation's, i.e. it adds nothing beyond bf16 rounding. (The
    largest error is the output's own rounding in both, so the mean error is compared.)

    Reverse-verified: a softmax computed by hand in bf16 (exp of max-subtracted bf16 scores, divided
    by their bf16 sum) raises the mean error by about a fifth and fails."""
    gen = torch.Generator().manual_seed(5)
    seq = torch.randint(100, 421, (32,), generator=gen).tolist()
    meta, slots = scenario([n - 1 for n in seq], [1] * 32, 16, seed=5)
    q, k_cache, v_cache = paged_tensors(meta, heads=9, kv_heads=3, dim=64, dtype=torch.bfloat16, seed=5)
    exact = reference(q, k_cache, v_cache, meta, slots, 0.125)
    chunked = decode_attention(
        q, k_cache, v_cache, chunked_decode_group(16, meta.page_table, seq, None), 0.125, GatherWorkspace()
    )
    padded = decode_attention(
        q, k_cache, v_cache, padded_decode_group(16, meta.page_table, seq, None), 0.125, GatherWorkspace()
    )
    assert chunked.dtype == torch.bfloat16
    chunked_err = float((chunked.double() - exact).abs().mean())
    padded_err = float((padded.double() - exact).abs().mean())
    assert chunked_err <= 1.1 * padded_err
    torch.testing.assert_close(chunked.double(), exact, atol=2e-2, rtol=1.6e-2)


def test_one_backend_across_forwards_of_growing_and_shrinking_size() -> None:
    """The kept gather buffer is regrown for a larger forward and reused for a smaller one.

    Reverse-verified: handing out the first buffer without growing it fails the second forward."""
    backend = TorchNativeBackend()
    for seq in (SPREAD[:4], SPREAD, SPREAD[:2], RAGGED):
        meta, slots = scenario([n - 1 for n in seq], [1] * len(seq), 16, seed=len(seq))
        q, k_cache, v_cache = paged_tensors(meta, heads=4, kv_heads=2, dim=8, dtype=torch.float64, seed=len(seq))
        backend.plan(meta)
        torch.testing.assert_close(
            backend.attend(q, k_cache, v_cache, scale=0.5), reference(q, k_cache, v_cache, meta, slots, 0.5)
        )


def test_workspace_hands_out_one_buffer_until_outgrown() -> None:
    workspace = GatherWorkspace()
    first = workspace.take((2, 3, 4), torch.bfloat16, torch.device("cpu"))
    smaller = workspace.take((5, 4), torch.bfloat16, torch.device("cpu"))
    assert smaller.data_ptr() == first.data_ptr() and smaller.shape == (5, 4) and smaller.is_contiguous()
    larger = workspace.take((7, 8), torch.bfloat16, torch.device("cpu"))
    assert larger.shape == (7, 8)
    assert workspace.take((2, 3), torch.float32, torch.device("cpu")).dtype == torch.float32


def test_decode_group_refuses_lengths_that_do_not_fit_its_table() -> None:
    table = torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="one length >= 1 per page-table row; got 1 lengths"):
        decode_group(16, table, [5], None)
    with pytest.raises(ValueError, match="got 2 lengths \\(min 0\\)"):
        decode_group(16, table, [5, 0], None)
    with pytest.raises(ValueError, match="page table has 3 pages per row; 49 keys need 4 of 16"):
        padded_decode_group(16, table, [49, 3], None)
    with pytest.raises(ValueError, match="page table has 3 pages per row; 200 keys need more of 16"):
        chunked_decode_group(16, table, [200, 3], None)
