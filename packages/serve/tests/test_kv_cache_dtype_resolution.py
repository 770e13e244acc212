"""A KV cache in another dtype than the model computes in is accepted only where every attention
kernel the runners build reads it: a bf16 cache under float32 compute with cpu_paged halves (the
CPU's batch-invariant default); a torch_native half, a draft backend that cannot read it, or a
cache wider than the compute dtype is refused in one line naming the leaf, the kernel and what it
reads. The pool is sized at the cache's own bytes per token.

Reverse-verified by hand: with `kv_cache_dtype_attended` removed from HANDLERS, the refusals
resolved (and the server then died at warm-up on the kernel's dtype check) and the refused cases
failed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from serve.record import ResolutionError, ServerArgs, resolve

pytestmark = pytest.mark.usefixtures("unpublished")


def test_a_bf16_cache_under_float32_compute_resolves_on_cpu_paged_and_is_sized_at_its_bytes(tiny_model: Path) -> None:
    wide = resolve(
        ServerArgs(model_path=str(tiny_model), device="cpu", dtype="float32", kv_cache_memory_mb=1)
    ).server_args
    narrow = resolve(
        ServerArgs(
            model_path=str(tiny_model),
            device="cpu",
            dtype="float32",
            kv_cache_memory_mb=1,
            kv_cache_dtype="bfloat16",
            attention_backend="cpu_paged",
        )
    ).server_args
    assert narrow.kv_cache_dtype == "bfloat16"
    assert narrow.max_total_tokens == 2 * wide.max_total_tokens


@pytest.mark.parametrize(
    ("flags", "refusal"),
    [
        (
            {"dtype": "float32", "kv_cache_dtype": "bfloat16", "enable_deterministic_inference": False},
            r"with attention_backend = auto \(builds torch_native for the prefill half\): attention torch_native "
            r"cannot read a bfloat16 KV cache under float32 compute; it reads the compute dtype \(float32\); accepted: "
            r"kv_cache_dtype auto",
        ),
        (
            {"dtype": "bfloat16", "kv_cache_dtype": "float32"},
            r"with attention_backend = auto \(builds cpu_paged for the prefill half\): attention cpu_paged cannot read "
            r"a float32 KV cache under bfloat16 compute; it reads the compute dtype \(bfloat16\) or bfloat16 under "
            r"float32",
        ),
        (
            {"dtype": "float32", "kv_cache_dtype": "float16", "attention_backend": "cpu_paged"},
            r"with attention_backend = cpu_paged: attention cpu_paged cannot read a float16 KV cache under float32 "
            r"compute",
        ),
    ],
)
def test_a_cache_no_attention_kernel_here_reads_is_refused_naming_the_kernel(
    tiny_model: Path, flags: dict[str, object], refusal: str
) -> None:
    with pytest.raises(ResolutionError, match=rf"^kv_cache_dtype='{flags['kv_cache_dtype']}' \(from [^)]*\) {refusal}"):
        resolve(ServerArgs(model_path=str(tiny_model), device="cpu", **flags))  # type: ignore[arg-type]
