"""The triton backend equals attention computed request by request from the pages (float64, explicit
softmax) and equals torch_native, for extends, decodes and mixed batches, at page sizes 1, 4, 16
and 64 (key blocks of 32 one-slot pages, 8 pages of 4, 2 of 16, one of 64 in the extend kernel) and
128 (one page per block, larger than the blocks chosen for small pages), with GQA and MHA; it
answers q's dtype, refuses what its kernels cannot take (a page size that is not a power of two
among it: a page is one `tl.arange` tile), and says how to run it on a CPU.

Without a GPU the kernels run in Triton's interpreter (conftest sets TRITON_INTERPRET=1) on CPU
tensors; with a GPU the same comparisons run on CUDA tensors with compiled kernels, bf16 too, and
the CPU cases skip (the kernels are then not interpreted).
"""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from paged_reference import Metadata, paged_tensors, reference, scenario

from attn_backends import TorchNativeBackend
from attn_backends.backends.triton_backend import TritonBackend
from attn_backends.kernels.triton_kernels import INTERPRETED

ON_CPU = pytest.param(
    "cpu", marks=pytest.mark.skipif(not INTERPRETED, reason="the kernels run on CPU tensors only interpreted")
)
ON_CUDA = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"))
# (atol, rtol) against the float64 answer: each dtype's own output rounding (bf16 is only checked on CUDA).
TOLERANCE = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (2e-2, 1.6e-2)}
SCENARIOS = [
    ([0, 0, 0], [5, 1, 9]),  # extend from scratch, a one-token row among them
    ([3, 0, 7], [4, 6, 2]),  # extends over cached prefixes next to a fresh prompt
    ([5, 90, 1], [1, 1, 1]),  # pure decode, one request over two of the decode kernel's key blocks
    ([6, 0, 9], [1, 8, 1]),  # mixed
    ([0, 5, 2, 9], [7, 1, 3, 1]),  # mixed: decodes between extends
    ([40], [1]),  # a lone decode, its last page not full at page size 16
    ([20, 0], [37, 3]),  # one request over three query blocks and two key blocks
]


def _on(meta: Metadata, device: str) -> Metadata:
    """The same forward with its tensors on `device`."""
    return dataclasses.replace(
        meta,
        page_table=meta.page_table.to(device),
        prefix_lens=meta.prefix_lens.to(device),
        extend_lens=meta.extend_lens.to(device),
        seq_lens=meta.seq_lens.to(device),
    )


def _case(
    prefix: list[int],
    extend: list[int],
    page_size: int,
    heads: int,
    kv_heads: int,
    dim: int,
    dtype: torch.dtype,
    device: str,
) -> tuple[Metadata, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A shuffled paged forward on `device` and its float64 answer (on the CPU)."""
    meta, slots = scenario(prefix, extend, page_size, seed=page_size + sum(prefix))
    q, k_cache, v_cache = paged_tensors(meta, heads=heads, kv_heads=kv_heads, dim=dim, dtype=dtype, seed=3)
    expected = reference(q, k_cache, v_cache, meta, slots, 1 / math.sqrt(dim))
    return _on(meta, device), q.to(device), k_cache.to(device), v_cache.to(device), expected


def _triton(meta: Metadata, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> torch.Tensor:
    backend = TritonBackend()
    backend.plan(meta)
    return backend.attend(q, k_cache, v_cache, scale=1 / math.sqrt(q.shape[2]))


@pytest.mark.parametrize("device", [ON_CPU, ON_CUDA])
@pytest.mark.parametrize("heads,kv_heads", [(4, 2), (4, 4), (6, 2)])
@pytest.mark.parametrize("page_size", [1, 4, 16, 64])
@pytest.mark.parametrize("prefix,extend", SCENARIOS)
def test_matches_reference_and_torch_native(
    prefix: list[int], extend: list[int], page_size: int, heads: int, kv_heads: int, device: str
) -> None:
    """fp32, head_dim 16; GQA (4 over 2), MHA, and a group of 3 (a padded head block).

    Reverse-verified: dropping the causal mask (keeping only `key_ok`) in the extend kernel fails
    every case with an extend > 1; mapping query heads to kv heads interleaved
    (head = in_group * kv_heads + kv_head) in both kernels fails every GQA case (4/2 and 6/2) and
    no MHA case; letting the decode kernel read one key past seq_lens fails the pure-decode and
    lone-decode cases (and the fp16 pure-decode case); starting every query block of a request at
    its first batch row fails the case of three query blocks; shifting the in-page offset by one
    (`tl.arange(0, PAGE_SIZE) + 1` in the page tile) in either kernel fails every case of that
    kernel at every page size."""
    meta, q, k_cache, v_cache, expected = _case(prefix, extend, page_size, heads, kv_heads, 16, torch.float32, device)
    got = _triton(meta, q, k_cache, v_cache)
    atol, rtol = TOLERANCE[torch.float32]
    torch.testing.assert_close(got.cpu(), expected.float(), atol=atol, rtol=rtol)
    native = TorchNativeBackend()
    native.plan(meta)
    torch.testing.assert_close(got, native.attend(q, k_cache, v_cache, scale=1 / math.sqrt(16)), atol=atol, rtol=rtol)


@pytest.mark.parametrize("device", [ON_CPU, ON_CUDA])
@pytest.mark.parametrize("prefix,extend", [([150, 3], [1, 1]), ([100, 0], [40, 9])])  # decode, extend
def test_pages_of_128_slots(prefix: list[int], extend: list[int], device: str) -> None:
    """Page size 128: each key block is one whole page; the first request spans two pages, its last one partly full."""
    meta, q, k_cache, v_cache, expected = _case(prefix, extend, 128, 4, 2, 16, torch.float32, device)
    atol, rtol = TOLERANCE[torch.float32]
    torch.testing.assert_close(_triton(meta, q, k_cache, v_cache).cpu(), expected.float(), atol=atol, rtol=rtol)


@pytest.mark.parametrize(
    "device,dtype",
    [
        pytest.param(*ON_CPU.values, torch.float16, marks=ON_CPU.marks),
        pytest.param(*ON_CUDA.values, torch.float16, marks=ON_CUDA.marks),
        pytest.param(*ON_CUDA.values, torch.bfloat16, marks=ON_CUDA.marks),
    ],
)
@pytest.mark.parametrize("prefix,extend", [([3, 0, 7], [4, 6, 2]), ([6, 0, 9], [1, 8, 1]), ([5, 90, 1], [1, 1, 1])])
def test_half_inputs_answer_their_dtype(prefix: list[int], extend: list[int], device: str, dtype: torch.dtype) -> None:
    """fp16 (and on CUDA bf16) in, the same dtype out, within that dtype's rounding; head_dim 64."""
    meta, q, k_cache, v_cache, expected = _case(prefix, extend, 16, 4, 2, 64, dtype, device)
    got = _triton(meta, q, k_cache, v_cache)
    assert got.dtype == dtype
    atol, rtol = TOLERANCE[dtype]
    torch.testing.assert_close(got.cpu().double(), expected, atol=atol, rtol=rtol)


@pytest.mark.parametrize("device", [ON_CPU, ON_CUDA])
@pytest.mark.parametrize("dim", [8, 24, 512])
@pytest.mark.parametrize("extend", [[1, 1], [3, 1]])  # the decode kernel and the extend kernel
def test_unsupported_head_dim_is_refused(dim: int, extend: list[int], device: str) -> None:
    """Reverse-verified: without the head_dim check every case fails."""
    meta, q, k_cache, v_cache, _ = _case([2, 0], extend, 1, 4, 2, dim, torch.float32, device)
    backend = TritonBackend()
    backend.plan(meta)
    with pytest.raises(ValueError, match=f"head_dim a power of two from 16 to 256, got {dim}"):
        backend.attend(q, k_cache, v_cache, scale=0.5)


@pytest.mark.parametrize("device", [ON_CPU, ON_CUDA])
@pytest.mark.parametrize("page_size", [3, 12])
@pytest.mark.parametrize("extend", [[1, 1], [3, 1]])  # the decode kernel and the extend kernel
def test_page_size_not_a_power_of_two_is_refused(page_size: int, extend: list[int], device: str) -> None:
    """A page is a `tl.arange(0, PAGE_SIZE)` tile, so only powers of two.

    Reverse-verified: without the page-size check every case fails (the interpreter's own error
    from `tl.arange` names no page size and no way out)."""
    meta, q, k_cache, v_cache, _ = _case([5, 0], extend, page_size, 4, 2, 16, torch.float32, device)
    backend = TritonBackend()
    with pytest.raises(
        ValueError,
        match=f"takes powers of two: page_size = {page_size}; use 1, 2, 4, 8, 16, "
        r"\.\.\. or torch_native / cpu_paged",
    ):
        backend.plan(meta)
        backend.attend(q, k_cache, v_cache, scale=0.5)


def test_attend_before_plan_is_refused() -> None:
    with pytest.raises(RuntimeError, match="before plan"):
        TritonBackend().attend(torch.zeros(1, 2, 16), torch.zeros(2, 4, 16), torch.zeros(2, 4, 16), scale=0.5)


def test_cpu_without_the_interpreter_is_refused() -> None:
    """A fresh interpreter with TRITON_INTERPRET=0: the kernels compile for a GPU, so plan refuses
    CPU tensors. Reverse-verified: without the check in plan this fails."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from paged_reference import scenario\n"
        "from attn_backends.backends.triton_backend import TritonBackend\n"
        "try:\n"
        "    TritonBackend().plan(scenario([2], [3], 1, seed=0)[0])\n"
        "except RuntimeError as e:\n"
        "    print(e)\n"
    )
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(Path(__file__).parent)], env=env, capture_output=True, text=True, check=True
    )
    assert "triton runs on a CPU only under TRITON_INTERPRET=1 (set before import)" in done.stdout, done.stderr
