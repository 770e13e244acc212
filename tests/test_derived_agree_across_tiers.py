"""Every derived value the record exposes equals the bag accessor over the published projection
of that record, across a matrix of its inputs; and the accessor follows a post-publish override.

The record's members and the accessors call the same `config_bags.server.derived` helpers; these tests
pin that, so a member that computes on its own (and drifts) fails here.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from config_bags import override, publish, unpublish
from config_bags.server import (
    attention_backends,
    chunk_size,
    cuda_graph_decode_bs,
    linear_attn_backends,
    mamba_cache_slots,
    max_prefill_buffer_tokens,
    max_speculative_num_draft_tokens,
)
from serve.record import ServerArgs


@pytest.fixture(autouse=True)
def _unpublished() -> Iterator[None]:
    unpublish()
    yield
    unpublish()


def matrix(**axes: tuple[Any, ...]) -> list[dict[str, Any]]:
    """Every combination of the axes' interesting values, one dict of leaves per case."""
    names = list(axes)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*axes.values())]


def case_id(leaves: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in leaves.items())


# derived name -> (record member, accessor, matrix of its inputs)
DERIVED: dict[str, tuple[Callable[[ServerArgs], Any], Callable[[], Any], list[dict[str, Any]]]] = {
    "max_prefill_buffer_tokens": (
        lambda a: a.max_prefill_buffer_tokens,
        max_prefill_buffer_tokens,
        matrix(max_prefill_tokens=(1, 4096, 16384), chunked_prefill_size=(-1, 512, 8192, 65536), pp_size=(1, 2, 4)),
    ),
    "attention_backends": (
        lambda a: a.attention_backends,
        attention_backends,
        matrix(
            attention_backend=("auto", "torch_native", "cpu_paged", "triton", "flashinfer"),
            prefill_attention_backend=(None, "triton", "flashinfer"),
            decode_attention_backend=(None, "torch_native", "flashinfer"),
        ),
    ),
    "linear_attn_backends[cpu]": (
        lambda a: a.linear_attn_backends("cpu"),
        lambda: linear_attn_backends("cpu"),
        matrix(
            linear_attn_backend=(None, "triton", "torch_native"),
            linear_attn_prefill_backend=(None, "flashinfer"),
            linear_attn_decode_backend=(None, "torch_native"),
        ),
    ),
    "linear_attn_backends[cuda]": (
        lambda a: a.linear_attn_backends("cuda"),
        lambda: linear_attn_backends("cuda"),
        matrix(
            linear_attn_backend=(None, "triton", "torch_native"),
            linear_attn_prefill_backend=(None, "flashinfer"),
            linear_attn_decode_backend=(None, "torch_native"),
        ),
    ),
    "max_speculative_num_draft_tokens": (
        lambda a: a.max_speculative_num_draft_tokens,
        max_speculative_num_draft_tokens,
        matrix(
            speculative_algorithm=(None, "ngram", "draft_model"),
            speculative_num_steps=(1, 3, 8),
            speculative_eagle_topk=(1, 2, 4),
            speculative_num_draft_tokens=(2, 4, 16),
        ),
    ),
    "cuda_graph_decode_bs": (
        lambda a: a.effective_cuda_graph_decode_bs,
        cuda_graph_decode_bs,
        matrix(cuda_graph_max_bs=(1, 3, 8, 9, 160), cuda_graph_decode_bs=(None, (1, 2, 3), (4,))),
    ),
    "chunk_size": (
        lambda a: a.chunk_size,
        chunk_size,
        matrix(chunked_prefill_size=(-1, 1, 100, 2048), page_size=(1, 16, 64)),
    ),
    "mamba_cache_slots": (
        lambda a: a.mamba_cache_slots,
        mamba_cache_slots,
        matrix(max_mamba_cache_size=(None, 1, 48), max_running_requests=(1, 8, 256)),
    ),
}

CASES = [
    pytest.param(name, leaves, id=f"{name}[{case_id(leaves)}]")
    for name, (_, _, cases) in DERIVED.items()
    for leaves in cases
]


def record_of(leaves: dict[str, Any]) -> ServerArgs:
    if leaves.get("speculative_algorithm") == "draft_model":
        leaves = {**leaves, "speculative_draft_model_path": "/models/draft"}
    return ServerArgs(**leaves)


@pytest.mark.parametrize(("name", "leaves"), CASES)
def test_record_member_equals_bag_accessor(name: str, leaves: dict[str, Any]) -> None:
    """Reverse-verified: making `ServerArgs.max_prefill_buffer_tokens` ignore pp_size (its own
    arithmetic instead of the helper) fails the pp_size > 1 cases."""
    member, accessor, _ = DERIVED[name]
    args = record_of(leaves)
    publish(args.bags(), role="standalone")
    assert member(args) == accessor()


# derived name -> (base leaves, the override that changes it); before begin_serving() any leaf may change
OVERRIDES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "max_prefill_buffer_tokens": (
        {"max_prefill_tokens": 1024, "chunked_prefill_size": 512},
        {"chunked_prefill_size": 4096},
    ),
    "attention_backends": ({"attention_backend": "triton"}, {"decode_attention_backend": "flashinfer"}),
    "linear_attn_backends[cpu]": ({}, {"linear_attn_backend": "torch_native"}),
    "max_speculative_num_draft_tokens": (
        {"speculative_algorithm": "ngram", "speculative_num_draft_tokens": 4},
        {"speculative_num_draft_tokens": 12},
    ),
    "cuda_graph_decode_bs": ({"cuda_graph_max_bs": 16}, {"cuda_graph_max_bs": 32}),
    "chunk_size": ({"chunked_prefill_size": 100, "page_size": 16}, {"chunked_prefill_size": 1000}),
    "mamba_cache_slots": ({"max_running_requests": 8}, {"max_running_requests": 16}),
}


@pytest.mark.parametrize("name", sorted(OVERRIDES))
def test_the_accessor_follows_a_post_publish_override(name: str) -> None:
    """Reverse-verified: with `max_prefill_buffer_tokens()` caching its first answer, the
    max_prefill_buffer_tokens case fails.

    After `override(...)` the accessor answers what a record holding the new value would,
    while the record it was projected from keeps its old answer (a stored copy would not move)."""
    member, accessor, _ = DERIVED[name]
    base, change = OVERRIDES[name]
    args = record_of(base)
    publish(args.bags(), role="standalone")
    before = accessor()
    override("admin", **change)
    after = accessor()
    assert after != before
    assert after == member(record_of({**base, **change}))
    assert member(args) == before
