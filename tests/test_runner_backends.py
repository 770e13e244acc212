"""The runner builds its (prefill, decode) attention backends through the factory it is handed, from
`attention_backends()` at build time, and stamps each with the effective name the factory answers;
nothing is written back into the published config."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from attn_backends import AttentionBackend, UnknownAttentionBackendError, build_attention_backend
from config_bags import Bags, ExecBag, KernelBag, MemoryBag, ModelBag, attention_backends, publish, unpublish

from runtime_runner.runner import ModelRunner
from runtime_runner.standalone import StandaloneDriver

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, head_dim=8,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128))
    target = tmp_path_factory.mktemp("tiny-qwen3")
    model.save_pretrained(target)
    return target


@pytest.fixture(autouse=True)
def _unpublished() -> Iterator[None]:
    unpublish()
    yield
    unpublish()


def _publish(checkpoint: Path, kernel: KernelBag) -> None:
    publish(Bags(model=ModelBag(model_path=str(checkpoint), dtype="float32"), memory=MemoryBag(max_total_tokens=256),
                 exec=ExecBag(kernel=kernel)), role="standalone")


def test_runner_stamps_the_names_the_factory_answers(checkpoint: Path) -> None:
    _publish(checkpoint, KernelBag(prefill_attention_backend="torch_native"))
    runner = ModelRunner(build_attention_backend)
    assert (runner.prefill_attention_backend_name, runner.decode_attention_backend_name) == ("torch_native", "torch_native")


def test_stamp_is_the_effective_name_and_never_recorded(checkpoint: Path) -> None:
    """A factory that falls back (asked for flashinfer, builds torch_native) answers the name it
    built; the runner reports that name while the published config still says what the operator asked.

    Reverse-verified: stamping the requested name instead of the answered one fails this test."""
    asked: list[str] = []

    def falling_back(name: str) -> tuple[str, AttentionBackend]:
        asked.append(name)
        return build_attention_backend("torch_native")

    _publish(checkpoint, KernelBag(attention_backend="torch_native", decode_attention_backend="flashinfer"))
    runner = ModelRunner(falling_back)
    assert asked == ["torch_native", "flashinfer"]
    assert runner.decode_attention_backend_name == "torch_native"
    assert attention_backends() == ("torch_native", "flashinfer")
    assert StandaloneDriver(runner).generate([[1, 2, 3]], 2)[0][0] >= 0


def test_unregistered_backend_lists_the_registered_ones(checkpoint: Path) -> None:
    _publish(checkpoint, KernelBag(attention_backend="triton"))
    with pytest.raises(UnknownAttentionBackendError, match="'triton' is not registered; registered: torch_native"):
        ModelRunner(build_attention_backend)
