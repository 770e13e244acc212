"""Resolution of a hybrid launch: the linear-attention and recurrent-state leaves act on a
Gated-DeltaNet hybrid and are refused, naming the leaf, for a model without linear layers or a
kernel this device cannot run; the KV pool is sized over the full-attention layers alone; and
--explain shows the state slots an unset max_mamba_cache_size derives to.

Reverse-verified by hand: with the `linear_attention` handler removed from HANDLERS, a Llama
launch with max_mamba_cache_size = 8 resolved (accepted and ignored) and the first test failed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from serve.main import main
from serve.record import ResolutionError, ServerArgs, resolve
from serve_testing.tiny_hybrid_checkpoint import build_tiny_hybrid_checkpoint

FLOAT32_BYTES = 4


pytestmark = pytest.mark.usefixtures("unpublished")


@pytest.fixture(scope="module")
def tiny_hybrid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_hybrid_checkpoint(tmp_path_factory.mktemp("hybrid"), family="qwen3_next")


@pytest.mark.parametrize(
    ("leaf", "value"),
    [
        ("linear_attn_backend", "torch_native"),
        ("linear_attn_decode_backend", "cpu_fused"),
        ("mamba_ssm_dtype", "bfloat16"),
        ("max_mamba_cache_size", 8),
        ("mamba_snapshot_interval", 64),
        ("mamba_snapshot_memory_mb", 0.0),
    ],
)
def test_a_model_without_linear_layers_refuses_their_leaves(tiny_model: Path, leaf: str, value: object) -> None:
    with pytest.raises(
        ResolutionError, match=rf"^{leaf} = {value!r}: LlamaForCausalLM has no linear-attention layers; accepted: "
    ):
        resolve(ServerArgs(model_path=str(tiny_model), **{leaf: value}))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("leaf", "value", "why"),
    [
        ("linear_attn_prefill_backend", "triton", "TRITON_INTERPRET=1"),
        ("linear_attn_backend", "flashinfer", "lacks flashinfer's linear-attention kernels"),
    ],
)
def test_a_kernel_this_device_cannot_run_is_refused(
    tiny_hybrid: Path, leaf: str, value: str, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(
        "TRITON_INTERPRET", raising=False
    )  # a CPU runs Triton only in its interpreter, which tests may turn on
    with pytest.raises(ResolutionError, match=rf"^{leaf} = {value!r}: .*{why}"):
        resolve(ServerArgs(model_path=str(tiny_hybrid), device="cpu", **{leaf: value}))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("leaves", "equation"),
    [
        (
            {"mamba_snapshot_interval": 10, "page_size": 4},
            "mamba_snapshot_interval % page_size = 10 % 4 = 2, must be 0",
        ),
        (
            {"mamba_snapshot_interval": 96, "chunked_prefill_size": 256},
            "chunk % mamba_snapshot_interval = 256 % 96 = 64 and mamba_snapshot_interval % chunk = 96",
        ),
    ],
)
def test_a_hybrid_refuses_snapshots_off_the_page_and_chunk_grid(
    tiny_hybrid: Path, leaves: dict[str, int], equation: str
) -> None:
    """Rule snapshot_interval_on_grid, for a hybrid only (the dense model above refuses the leaf
    itself); the refusal states the equation. Reverse-verified: without SNAPSHOT_GRID in
    launch_rules both resolve."""
    with pytest.raises(ResolutionError, match=re.escape(equation)):
        resolve(ServerArgs(model_path=str(tiny_hybrid), **leaves))  # type: ignore[arg-type]
    resolve(ServerArgs(model_path=str(tiny_hybrid), mamba_snapshot_interval=128, chunked_prefill_size=256))


def test_a_hybrid_resolves_its_leaves_and_sizes_kv_over_its_full_attention_layers(tiny_hybrid: Path) -> None:
    args = resolve(
        ServerArgs(
            model_path=str(tiny_hybrid),
            dtype="float32",
            kv_cache_memory_mb=1,
            mamba_ssm_dtype="bfloat16",
            linear_attn_decode_backend="torch_native",
        )
    ).server_args
    full_layers, kv_heads, head_dim = 1, 2, 16  # the tiny checkpoint's one full-attention layer of six
    assert args.max_total_tokens == 1024 * 1024 // (full_layers * 2 * kv_heads * head_dim * FLOAT32_BYTES)
    assert (args.mamba_ssm_dtype, args.linear_attn_decode_backend) == ("bfloat16", "torch_native")


def test_explain_shows_the_state_slots_an_unset_cache_size_derives_to(
    tiny_hybrid: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["--model-path", str(tiny_hybrid), "--explain", "max-mamba-cache-size", "--max-running-requests", "12"])
        == 0
    )
    text = capsys.readouterr().out
    assert text.startswith("max_mamba_cache_size = None\n") and "  derived: mamba_cache_slots = 12" in text
    assert (
        main(["--model-path", str(tiny_hybrid), "--explain", "max-mamba-cache-size", "--max-mamba-cache-size", "5"])
        == 0
    )
    assert "  derived: mamba_cache_slots = 5" in capsys.readouterr().out
