"""The tiny hybrid checkpoints are what they claim (the family's own config and weight names, both
layer kinds, MoE where asked) and their transformers reference is sound: greedy output that is not
one repeated token, computed offline, and the same with and without transformers' cache."""

from __future__ import annotations

import importlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
import torch
from safetensors import safe_open

from serve_testing.tiny_hybrid_checkpoint import (
    ARCHITECTURES,
    Family,
    build_tiny_hybrid_checkpoint,
    load_reference_model,
    reference_greedy,
)

VARIANTS: list[tuple[Family, bool]] = [("qwen3_next", True), ("qwen3_next", False), ("qwen3_5", False)]
SHORT_PROMPT = [5, 17, 42, 99, 7]
# Longer than the chunked delta rule's 64-token chunk, so the prefill crosses a chunk boundary.
LONG_PROMPT = [(i * 37 + 11) % 380 + 3 for i in range(80)]
NEW_TOKENS = 8
MODELING: dict[Family, str] = {
    "qwen3_next": "transformers.models.qwen3_next.modeling_qwen3_next",
    "qwen3_5": "transformers.models.qwen3_5.modeling_qwen3_5",
}


@pytest.fixture(scope="module", autouse=True)
def one_cpu_thread() -> Iterator[None]:
    """Matmuls this small are fastest on one thread, and on a shared 2-core machine several
    threads spin against other processes: 7 ms per 64x64 linear instead of microseconds."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(
    scope="module", params=VARIANTS, ids=[f"{family}-{'moe' if moe else 'dense'}" for family, moe in VARIANTS]
)
def checkpoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Family, bool, Path]:
    family, moe = request.param
    folder = build_tiny_hybrid_checkpoint(tmp_path_factory.mktemp("hybrid") / family, family=family, moe=moe)
    return family, moe, folder


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    with safe_open(str(folder / "model.safetensors"), framework="pt") as handle:
        return {name: handle.get_tensor(name) for name in handle.keys()}


def test_config_and_weights_are_the_familys_own(checkpoint: tuple[Family, bool, Path]) -> None:
    family, moe, folder = checkpoint
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == [ARCHITECTURES[family]]
    assert set(config["layer_types"]) == {"linear_attention", "full_attention"}
    assert config["num_hidden_layers"] == len(config["layer_types"])
    weights = _weights(folder)
    assert {tensor.dtype for tensor in weights.values()} == {torch.float32}
    linear = config["layer_types"].index("linear_attention")
    full = config["layer_types"].index("full_attention")
    fused = f"model.layers.{linear}.linear_attn.in_proj_qkvz.weight"
    separate = f"model.layers.{linear}.linear_attn.in_proj_qkv.weight"
    assert (fused in weights, separate in weights) == ((True, False) if family == "qwen3_next" else (False, True))
    assert f"model.layers.{full}.self_attn.q_proj.weight" in weights
    assert f"model.layers.{linear}.self_attn.q_proj.weight" not in weights
    sparse = moe and family == "qwen3_next"
    assert (f"model.layers.{linear}.mlp.experts.3.gate_proj.weight" in weights) == sparse
    assert (f"model.layers.{full}.mlp.shared_expert_gate.weight" in weights) == sparse
    assert (f"model.layers.{full}.mlp.gate_proj.weight" in weights) == (not sparse)
    assert (folder / "generation_config.json").is_file() and (folder / "tokenizer.json").is_file()


def test_reference_greedy_runs_offline_and_is_not_degenerate(
    checkpoint: tuple[Family, bool, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, folder = checkpoint

    def no_network(*args: Any, **kwargs: Any) -> NoReturn:
        raise AssertionError(f"the reference tried to reach the network: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    continuations = reference_greedy(folder, [SHORT_PROMPT, LONG_PROMPT], NEW_TOKENS)
    assert [len(tokens) for tokens in continuations] == [NEW_TOKENS, NEW_TOKENS]
    assert all(len(set(tokens)) > 1 for tokens in continuations), continuations


def test_cached_generate_equals_uncached_recomputation(checkpoint: tuple[Family, bool, Path]) -> None:
    _, _, folder = checkpoint
    model = load_reference_model(folder)
    cached = reference_greedy(folder, [SHORT_PROMPT, LONG_PROMPT], NEW_TOKENS)
    for prompt, expected in zip([SHORT_PROMPT, LONG_PROMPT], cached, strict=True):
        ids = list(prompt)
        with torch.no_grad():
            for _ in range(NEW_TOKENS):
                logits = model(torch.tensor([ids]), use_cache=False).logits
                ids.append(int(logits[0, -1].argmax()))
        assert ids[len(prompt) :] == expected


def test_mlp_only_layers_keep_a_dense_mlp(tmp_path: Path) -> None:
    folder = build_tiny_hybrid_checkpoint(tmp_path / "mixed", family="qwen3_next", mlp_only_layers=[1])
    weights = _weights(folder)
    assert json.loads((folder / "config.json").read_text())["mlp_only_layers"] == [1]
    assert "model.layers.1.mlp.gate_proj.weight" in weights and "model.layers.1.mlp.gate.weight" not in weights
    assert "model.layers.0.mlp.gate.weight" in weights and "model.layers.2.mlp.experts.0.up_proj.weight" in weights


def test_layer_types_are_honoured_and_checked(tmp_path: Path) -> None:
    folder = build_tiny_hybrid_checkpoint(
        tmp_path / "two", family="qwen3_5", layer_types=["full_attention", "linear_attention"]
    )
    assert json.loads((folder / "config.json").read_text())["layer_types"] == ["full_attention", "linear_attention"]
    with pytest.raises(ValueError, match="sliding_attention"):
        build_tiny_hybrid_checkpoint(tmp_path / "bad", family="qwen3_5", layer_types=["sliding_attention"])
    with pytest.raises(ValueError, match="mlp_only_layers applies to"):
        build_tiny_hybrid_checkpoint(tmp_path / "bad", family="qwen3_5", mlp_only_layers=[0])
    with pytest.raises(ValueError, match="family must be one of"):
        build_tiny_hybrid_checkpoint(tmp_path / "bad", family="llama")  # type: ignore[arg-type]


def test_reference_refuses_a_kernel_bound_linear_attention(
    checkpoint: tuple[Family, bool, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """transformers' own binding decorator, handed a package that does import, binds that package's
    function instead of the torch one; the reference must notice rather than compute with it."""
    from transformers.integrations.hub_kernels import use_kernel_func_from_hub_with_fallback

    family, _, folder = checkpoint
    module = importlib.import_module(MODELING[family])

    def torch_path(x: float) -> float:
        return x

    monkeypatch.setattr(module, "causal_conv1d_fn", use_kernel_func_from_hub_with_fallback("sqrt", "math")(torch_path))
    with pytest.raises(RuntimeError, match="causal_conv1d_fn is bound to"):
        load_reference_model(folder)
