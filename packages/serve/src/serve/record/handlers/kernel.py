"""Handlers for the attention kernels: what the chosen pair can run on, and the page size it implies."""

from __future__ import annotations

from config_bags import attention_backends_of

from serve.record.resolution import Resolution

FLASHINFER_PAGE_SIZE = 16


def attention_pair(res: Resolution) -> None:
    """flashinfer kernels need CUDA: refuse them on an explicitly CPU device, for whichever half
    of the pair (or the draft runner) would run them.

    The split fields are never filled from the base field: they answer what the operator named,
    and `attention_backends()` applies the fallback wherever the pair is read."""
    if res.server_args.device != "cpu":
        return
    pair = attention_backends_of(res.server_args.bags().exec.kernel)
    halves = (("prefill", pair.prefill, "prefill_attention_backend"), ("decode", pair.decode, "decode_attention_backend"))
    for half, backend, split_leaf in halves:
        if backend == "flashinfer":
            leaf = split_leaf if res.server_args.value(split_leaf) is not None else "attention_backend"
            raise res.refuse("attention_pair", leaf, "torch_native or triton on device cpu", f"the {half} half would run flashinfer, which needs CUDA")
    if res.server_args.speculative_draft_attention_backend == "flashinfer":
        raise res.refuse(
            "attention_pair", "speculative_draft_attention_backend", "torch_native or triton on device cpu", "flashinfer needs CUDA"
        )


def page_size_for_backend(res: Resolution) -> None:
    """flashinfer's paged kernels want whole pages of 16 tokens; triton kernels tile a page
    with tl.arange, which takes only powers of two."""
    pair = attention_backends_of(res.server_args.bags().exec.kernel)
    if "flashinfer" in pair:
        res.declare("page_size_for_backend", page_size=FLASHINFER_PAGE_SIZE)
    page = res.server_args.page_size
    if "triton" in pair and page & (page - 1):
        raise res.refuse("page_size_for_backend", "page_size", "a power of two (1, 2, 4, 8, 16, ...)", "the triton kernels tile a page with tl.arange")
