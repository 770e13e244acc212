"""Each runner holds its own linear-attention choice (design: runtime-half section 3).

The upstream defect: the hybrid target resolved its kernels with a per-runner prefill default and
recorded the result process-wide; the draft runner built after it resolved without a default, the
record now said the draft's kernels ("FLASHINFER, then TRITON"), and the target's layers ran them.
Here two hybrid runners are built in one process through one factory, the target first (with a
per-runner prefill default, torch_native) and then its draft (no default: the device's cpu_fused
for every phase); each holds its own stamp and its layers run its own kernels, before and after,
and the bags record neither.

Reverse-verified by hand: with LinearAttnBackendFactory.resolve keeping the last per-runner default
in a module global that a later resolve without one falls back to (a process-wide record), the
draft's stamp reads prefill torch_native and the test fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import config_bags
import config_bags.server
from attn_backends import DraftBackendFactory, LinearAttnBackendFactory, build_attention_pair
from config_bags.server import Bags, LinearAttnBackends, ModelBag, SpecBag
from runtime_runner.runner import ModelRunner
from serve_testing.tiny_hybrid_checkpoint import build_tiny_hybrid_checkpoint

TARGET_CHOICE = LinearAttnBackends(decode="cpu_fused", prefill="torch_native", verify="torch_native")
DRAFT_CHOICE = LinearAttnBackends(decode="cpu_fused", prefill="cpu_fused", verify="cpu_fused")


@pytest.fixture
def two_hybrids(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    target = build_tiny_hybrid_checkpoint(tmp_path / "target", family="qwen3_next")
    draft = build_tiny_hybrid_checkpoint(tmp_path / "draft", family="qwen3_5", seed=2)
    config_bags.unpublish()
    config_bags.publish(
        Bags(
            model=ModelBag(model_path=str(target), dtype="float32"),
            spec=SpecBag(speculative_algorithm="draft_model", speculative_draft_model_path=str(draft)),
        ),
        role="standalone",
    )
    yield target, draft
    config_bags.unpublish()


def _kernels_run(runner: ModelRunner) -> tuple[str, str, str]:
    backend = runner.linear_attn_backend
    assert backend is not None
    return backend.decode.name, backend.prefill.name, backend.verify.name


def test_a_draft_built_after_its_target_leaves_the_targets_choice_alone(two_hybrids: tuple[Path, Path]) -> None:
    hash_before = config_bags.config_hash()
    factory = LinearAttnBackendFactory(target_prefill_default=lambda device_type: "torch_native")
    target = ModelRunner(build_attention_pair, linear_attn_factory=factory)
    assert target.linear_attn_backends == TARGET_CHOICE and _kernels_run(target) == tuple(TARGET_CHOICE)
    draft = ModelRunner(DraftBackendFactory(), target=target, linear_attn_factory=factory)
    assert draft.linear_attn_backends == DRAFT_CHOICE and _kernels_run(draft) == tuple(DRAFT_CHOICE)
    assert target.linear_attn_backends == TARGET_CHOICE and _kernels_run(target) == tuple(TARGET_CHOICE)
    kernel = config_bags.server.get_exec().kernel
    assert (kernel.linear_attn_backend, kernel.linear_attn_prefill_backend, kernel.linear_attn_decode_backend) == (
        None,
        None,
        None,
    )
    assert config_bags.config_hash() == hash_before
