"""The flashinfer backend: its CSR planning checked on a CPU, its kernels against torch_native on CUDA.

Attending through the CSR arrays (as flashinfer reads them) must equal attention computed from
each request's own slots; without a GPU that is what can be checked of the flashinfer path.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from collections.abc import Iterator

import pytest
import torch
from paged_reference import Metadata, paged_tensors, reference, scenario

from attn_backends.backends.flashinfer_backend import FlashInferBackend, flashinfer_unavailable_reason, hnd_pages_view
from attn_backends.backends.flashinfer_csr import PagedCsr, paged_csr_of
from attn_backends.backends.torch_native import TorchNativeBackend

FLASHINFER_MISSING = importlib.util.find_spec("flashinfer") is None

SCENARIOS = [
    ([0, 0, 0], [5, 1, 9]),  # extends from scratch
    ([3, 0, 7], [4, 6, 2]),  # chunked continuations over a cached prefix next to a fresh prompt
    ([5, 12, 1], [1, 1, 1]),  # decodes
    ([6, 0, 9], [1, 8, 1]),  # mixed
    ([0, 5, 2, 9], [7, 1, 3, 1]),  # mixed, decodes between extends
    ([16, 31, 0], [16, 1, 17]),  # last pages exactly full at page sizes 4 and 16 (32, 32), one with one slot (17)
]


def csr_attention(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, csr: PagedCsr, page_size: int, scale: float
) -> torch.Tensor:
    """Attention reading only the CSR arrays, the way flashinfer does: request r's keys are the first
    (pages - 1) * page_size + last_page_len slots of its pages, its queries rows qo_indptr[r]..; query i
    of qo_len sees keys up to kv_len - qo_len + i. Float64."""
    q, k_cache, v_cache = q.double(), k_cache.double(), v_cache.double()
    group = q.shape[1] // k_cache.shape[0]
    qo, kv, indices, last = (t.tolist() for t in (csr.qo_indptr, csr.kv_indptr, csr.kv_indices, csr.kv_last_page_len))
    out = []
    for r in range(len(last)):
        pages = torch.tensor(indices[kv[r] : kv[r + 1]])
        kv_len = (len(pages) - 1) * page_size + last[r]
        slots = (pages[:, None] * page_size + torch.arange(page_size)[None, :]).reshape(-1)[:kv_len]
        k = k_cache[:, slots].repeat_interleave(group, dim=0)  # [heads, kv_len, d]
        v = v_cache[:, slots].repeat_interleave(group, dim=0)
        rows = q[qo[r] : qo[r + 1]].transpose(0, 1)  # [heads, qo_len, d]
        qo_len = rows.shape[1]
        visible = torch.arange(kv_len)[None, :] <= (kv_len - qo_len + torch.arange(qo_len))[:, None]
        scores = (rows @ k.transpose(1, 2) * scale).masked_fill(~visible, -math.inf)
        out.append((scores.softmax(-1) @ v).transpose(0, 1))
    return torch.cat(out)


def test_hand_case_arrays() -> None:
    """Reverse-verified: last_page_len as seq % page_size (0 for the full last page) and pages counted
    from extend_lens each fail this test."""
    meta = Metadata(
        page_size=4,
        page_table=torch.tensor([[7, 2, 0], [4, 0, 0], [1, 3, 5]]),
        prefix_lens=torch.tensor([0, 0, 5]),
        extend_lens=torch.tensor([5, 1, 3]),
        seq_lens=torch.tensor([5, 1, 8]),
        num_tokens=9,
        max_extend_len=5,
        max_seq_len=8,
    )
    csr = paged_csr_of(meta)
    assert csr.qo_indptr.tolist() == [0, 5, 6, 9]
    assert csr.kv_indptr.tolist() == [0, 2, 3, 5]
    assert csr.kv_indices.tolist() == [7, 2, 4, 1, 3]
    assert csr.kv_last_page_len.tolist() == [1, 1, 4]
    for array in (csr.qo_indptr, csr.kv_indptr, csr.kv_indices, csr.kv_last_page_len):
        assert array.dtype == torch.int32 and array.device == meta.page_table.device


@pytest.mark.parametrize("page_size", [1, 4, 16])
@pytest.mark.parametrize("prefix,extend", SCENARIOS)
def test_attention_through_csr_matches_reference(page_size: int, prefix: list[int], extend: list[int]) -> None:
    """Reverse-verified: last_page_len one short ((seq - 1) % page_size) fails every case; pages
    counted from extend_lens instead of seq_lens fails every case with a prefix beyond one page;
    qo_indptr from seq_lens fails every case with a prefix."""
    meta, slots = scenario(prefix, extend, page_size, seed=page_size + sum(prefix))
    q, k_cache, v_cache = paged_tensors(meta, heads=4, kv_heads=2, dim=8, dtype=torch.float64, seed=5)
    scale = 1 / math.sqrt(8)
    got = csr_attention(q, k_cache, v_cache, paged_csr_of(meta), page_size, scale)
    torch.testing.assert_close(got, reference(q, k_cache, v_cache, meta, slots, scale))


def test_narrow_page_table_is_refused() -> None:
    """Reverse-verified: without the width check the request's pages are silently cut short and this fails."""
    meta, _ = scenario([6, 0], [3, 2], page_size=4, seed=0)
    narrow = dataclasses.replace(meta, page_table=meta.page_table[:, :2])  # request 0 needs 3 pages
    with pytest.raises(ValueError, match="needs 3 pages"):
        paged_csr_of(narrow)


def test_extend_beyond_sequence_is_refused() -> None:
    """Reverse-verified: without the prefix check this fails (flashinfer would mask with a negative offset)."""
    meta, _ = scenario([0, 4], [3, 2], page_size=4, seed=0)
    with pytest.raises(ValueError, match="prefix_lens \\+ extend_lens"):
        paged_csr_of(dataclasses.replace(meta, extend_lens=torch.tensor([4, 2])))


def test_pool_view_is_hnd_pages_without_copy() -> None:
    """The pool handed to flashinfer: view[page, h, e] is slot page * page_size + e of head h, sharing storage.
    Reverse-verified: viewing the pool as [pages, kv_heads, ...] without the permute fails."""
    pool = torch.arange(3 * 12 * 5, dtype=torch.float32).reshape(3, 12, 5)  # 3 kv heads, 12 slots, head_dim 5
    view = hnd_pages_view(pool, page_size=4)
    assert view.shape == (3, 3, 4, 5) and view.data_ptr() == pool.data_ptr()
    for page, head, entry in [(0, 0, 0), (2, 1, 3), (1, 2, 2)]:
        assert torch.equal(view[page, head, entry], pool[head, page * 4 + entry])


def test_pool_view_refuses_what_flashinfer_cannot_address() -> None:
    """Reverse-verified: dropping the 32-bit stride check fails the meta-device case."""
    with pytest.raises(ValueError, match="whole number of pages"):
        hnd_pages_view(torch.zeros(2, 10, 4), page_size=4)
    with pytest.raises(ValueError, match="head_dim contiguously"):
        hnd_pages_view(torch.zeros(2, 8, 4).transpose(1, 2), page_size=2)  # head_dim stride 4
    huge = torch.empty(1, 2**26, 64, device="meta")  # a head stride of 2**32 elements
    with pytest.raises(ValueError, match="32-bit"):
        hnd_pages_view(huge, page_size=16)


@pytest.mark.skipif(not FLASHINFER_MISSING, reason="flashinfer is installed here")
def test_missing_flashinfer_is_explained() -> None:
    """Reverse-verified: a reason without the install hint fails both checks."""
    reason = flashinfer_unavailable_reason()
    assert reason is not None and "flashinfer-python" in reason
    with pytest.raises(ImportError, match=r"install attn-backends\[flashinfer\] \(flashinfer-python\)"):
        FlashInferBackend()


@pytest.fixture(scope="module")
def flashinfer_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """flashinfer writes a log under the home cache on import: point it at a temp dir first."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FLASHINFER_WORKSPACE_BASE", str(tmp_path_factory.mktemp("flashinfer")))
        yield


@pytest.mark.skipif(FLASHINFER_MISSING, reason="flashinfer is not installed")
def test_cpu_tensors_are_refused(flashinfer_home: None) -> None:
    meta, _ = scenario([0], [3], page_size=4, seed=0)
    with pytest.raises(RuntimeError, match="CUDA devices only"):
        FlashInferBackend().plan(meta)


@pytest.mark.skipif(FLASHINFER_MISSING or not torch.cuda.is_available(), reason="needs flashinfer and a CUDA device")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("heads,kv_heads", [(8, 2), (16, 2)])  # decodes on the CUDA-core and the tensor-core kernel
@pytest.mark.parametrize(
    "prefix,extend",
    [
        ([0, 0, 0], [5, 1, 9]),  # extend
        ([5, 40, 1], [1, 1, 1]),  # decode
        ([6, 0, 33, 9], [1, 8, 1, 20]),  # mixed, one extend over a cached prefix
    ],
)
def test_matches_torch_native_on_cuda(
    flashinfer_home: None,
    dtype: torch.dtype,
    page_size: int,
    heads: int,
    kv_heads: int,
    prefix: list[int],
    extend: list[int],
) -> None:
    """Two layers after one plan (the second reuses the first's flashinfer plan), each against torch_native."""
    meta, _ = scenario(prefix, extend, page_size, seed=page_size + sum(prefix))
    cuda = dataclasses.replace(
        meta,
        **{
            f.name: getattr(meta, f.name).cuda()
            for f in dataclasses.fields(meta)
            if isinstance(getattr(meta, f.name), torch.Tensor)
        },
    )
    flashinfer, native = FlashInferBackend(), TorchNativeBackend()
    flashinfer.plan(cuda)
    native.plan(cuda)
    scale = 1 / math.sqrt(64)
    tolerance = 1e-2 if dtype == torch.bfloat16 else 2e-3
    for layer in range(2):
        q, k_cache, v_cache = (t.cuda() for t in paged_tensors(meta, heads, kv_heads, dim=64, dtype=dtype, seed=layer))
        got = flashinfer.attend(q, k_cache, v_cache, scale=scale)
        want = native.attend(q, k_cache, v_cache, scale=scale)
        assert got.dtype == dtype
        torch.testing.assert_close(got, want, atol=tolerance, rtol=tolerance)
