"""The runner builds its (prefill, decode) attention backends through the factory it is handed, from
`attention_backends()` at build time, and stamps each with the effective name the factory answers;
nothing is written back into the published config."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from attn_backends import AttentionBackend, UnknownAttentionBackendError, build_attention_backend
from config_bags import ExecBag, KernelBag, MemoryBag, attention_backends

from runtime_runner.attention_seam import AttentionBackendFactory
from runtime_runner.runner import ModelRunner
from runtime_runner.standalone import StandaloneDriver

Runner = Callable[[KernelBag, AttentionBackendFactory], ModelRunner]


@pytest.fixture(scope="module")
def checkpoint(tiny_checkpoint: Callable[..., Path]) -> Path:
    return tiny_checkpoint("Qwen3ForCausalLM", num_hidden_layers=1, head_dim=8)


@pytest.fixture
def runner(checkpoint: Path, standalone_runner: Callable[..., ModelRunner]) -> Runner:
    """A runner over a 256-slot pool whose attention backends are built by `factory` under `kernel`."""
    return lambda kernel, factory: standalone_runner(checkpoint, factory=factory, memory=MemoryBag(max_total_tokens=256),
                                                     exec=ExecBag(kernel=kernel))


def test_runner_stamps_the_names_the_factory_answers(runner: Runner) -> None:
    built = runner(KernelBag(prefill_attention_backend="torch_native"), build_attention_backend)
    assert (built.prefill_attention_backend_name, built.decode_attention_backend_name) == ("torch_native", "torch_native")


def test_stamp_is_the_effective_name_and_never_recorded(runner: Runner) -> None:
    """A factory that falls back (asked for flashinfer, builds torch_native) answers the name it
    built; the runner reports that name while the published config still says what the operator asked.

    Reverse-verified: stamping the requested name instead of the answered one fails this test."""
    asked: list[str] = []

    def falling_back(name: str) -> tuple[str, AttentionBackend]:
        asked.append(name)
        return build_attention_backend("torch_native")

    built = runner(KernelBag(attention_backend="torch_native", decode_attention_backend="flashinfer"), falling_back)
    assert asked == ["torch_native", "flashinfer"]
    assert built.decode_attention_backend_name == "torch_native"
    assert attention_backends() == ("torch_native", "flashinfer")
    assert StandaloneDriver(built).generate([[1, 2, 3]], 2)[0][0] >= 0


def test_unregistered_backend_lists_the_registered_ones(runner: Runner) -> None:
    kernel = KernelBag(attention_backend="triton")
    with pytest.raises(UnknownAttentionBackendError, match="'triton' is not registered; registered: torch_native"):
        runner(kernel, build_attention_backend)
