"""A runner pays its one-time costs while it is built, not on the first request: on a CPU,
cpu_paged's paged-attention kernel (the default pair's decode half) and the runner's fused ops are loaded
(built first, on a machine that never had them) before the runner answers anything."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from attn_backends.kernels import paged_attention_kernel
from runtime_runner.kernels import cpu_fused_ops
from runtime_runner.runner import ModelRunner


def test_building_a_cpu_runner_loads_the_attention_kernel_and_the_fused_ops(
    tiny_checkpoint: Callable[..., Path],
    standalone_runner: Callable[..., ModelRunner],
) -> None:
    """Reverse-verified: removing the runner's warm-up step leaves the kernel unloaded and fails."""
    model_dir = tiny_checkpoint("LlamaForCausalLM")
    paged_attention_kernel._library.cache_clear()
    cpu_fused_ops._library.cache_clear()
    runner = standalone_runner(model_dir)
    assert runner.attention_stamp.decode == "cpu_paged"
    assert paged_attention_kernel._library.cache_info().currsize == 1
    assert cpu_fused_ops._library.cache_info().currsize == 1
