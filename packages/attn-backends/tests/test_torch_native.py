"""torch_native and cpu_paged equal attention computed request by request from the pages, by explicit softmax."""

from __future__ import annotations

import math

import pytest
import torch
from paged_reference import paged_tensors, reference, scenario

from attn_backends import AttentionBackend, CpuPagedBackend, TorchNativeBackend


@pytest.mark.parametrize("backend_class", [TorchNativeBackend, CpuPagedBackend])
@pytest.mark.parametrize("page_size", [1, 4])
@pytest.mark.parametrize(
    "prefix,extend",
    [
        ([0, 0, 0], [5, 1, 9]),  # extend from scratch, different lengths
        ([3, 0, 7], [4, 6, 2]),  # chunked continuations next to a fresh prompt
        ([5, 12, 1], [1, 1, 1]),  # decode
        ([6, 0, 9], [1, 8, 1]),  # mixed
        ([0, 5, 2, 9], [7, 1, 3, 1]),  # mixed: decodes between extends, one extend over a cached prefix
        ([40], [1]),  # one decode alone (the step the runner compiles), its last page not full at page size 4
    ],
)
def test_matches_per_request_softmax(
    page_size: int, prefix: list[int], extend: list[int], backend_class: type[AttentionBackend]
) -> None:
    """Reverse-verified: running extends without causality (is_causal=False, no mask) fails every
    case with extend > 1; writing the decode rows back in grouped order instead of batch order fails
    every case mixing one-token and multi-token requests (either decode path); gathering the lone
    decode's keys one slot past its length fails its case; giving cpu_paged's prompt rows all of
    their request's keys (no causal count) fails every case with extend > 1."""
    meta, slots = scenario(prefix, extend, page_size, seed=page_size + sum(prefix))
    q, k_cache, v_cache = paged_tensors(meta, heads=4, kv_heads=2, dim=8, dtype=torch.float64, seed=3)
    backend = backend_class()
    backend.plan(meta)
    got = backend.attend(q, k_cache, v_cache, scale=1 / math.sqrt(8))
    torch.testing.assert_close(got, reference(q, k_cache, v_cache, meta, slots, 1 / math.sqrt(8)))


@pytest.mark.parametrize("backend_class", [TorchNativeBackend, CpuPagedBackend])
def test_attend_before_plan_is_refused(backend_class: type[AttentionBackend]) -> None:
    with pytest.raises(RuntimeError, match="before plan"):
        backend_class().attend(torch.zeros(1, 2, 4), torch.zeros(2, 4, 4), torch.zeros(2, 4, 4), scale=0.5)
