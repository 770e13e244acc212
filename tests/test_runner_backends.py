"""The runner builds its attention pair through the pair factory it is handed, from
`attention_backends()` at build time, and stamps what the factory answers before anything reads
it; nothing is written back into the published config. Forward modes it cannot run, and a compiled
decode step over an untraceable decode half, are refused with what is accepted."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from attn_backends import AttentionBackendUnavailableError, AttentionStamp, build_attention_pair
from config_bags.server import ExecBag, GraphBag, KernelBag, MemoryBag, attention_backends, published_bags
from runtime_runner.attention_seam import AttentionBackend, AttentionPairFactory
from runtime_runner.errors import BatchError, UnsupportedConfigError
from runtime_runner.output import ForwardOutput
from runtime_runner.runner import ModelRunner
from runtime_runner.standalone import Batch, StandaloneDriver

Runner = Callable[..., ModelRunner]


@pytest.fixture(scope="module")
def checkpoint(tiny_checkpoint: Callable[..., Path]) -> Path:
    return tiny_checkpoint("Qwen3ForCausalLM", num_hidden_layers=1, head_dim=8)


@pytest.fixture
def runner(checkpoint: Path, standalone_runner: Callable[..., ModelRunner]) -> Runner:
    """A runner over a 256-slot pool whose pair is built by `factory` under `kernel` (and `graph`)."""

    def build(
        kernel: KernelBag, factory: AttentionPairFactory = build_attention_pair, graph: GraphBag | None = None
    ) -> ModelRunner:
        return standalone_runner(
            checkpoint,
            factory=factory,
            memory=MemoryBag(max_total_tokens=256),
            exec=ExecBag(kernel=kernel, graph=graph or GraphBag()),
        )

    return build


def test_runner_stamps_each_halfs_effective_kernel(runner: Runner) -> None:
    """auto on a CPU is cpu_paged for both halves under deterministic inference (on by default
    there), else torch_native for prompts and cpu_paged for decodes; a split field names its own
    half only, and the other half keeps the base field's auto (a split torch_native turns the
    unset deterministic leaf off)."""
    default = runner(KernelBag())
    assert default.attention_stamp == AttentionStamp("cpu_paged", "cpu_paged", False) and default.batch_invariant
    fast = runner(KernelBag(enable_deterministic_inference=False))
    assert fast.attention_stamp == AttentionStamp("torch_native", "cpu_paged", False) and not fast.batch_invariant
    split = runner(KernelBag(decode_attention_backend="torch_native"))
    assert split.attention_stamp == AttentionStamp("torch_native", "torch_native", False) and not split.batch_invariant
    assert runner(KernelBag(prefill_attention_backend="cpu_paged")).attention_stamp == AttentionStamp(
        "cpu_paged", "cpu_paged", False
    )


def test_deterministic_inference_refuses_what_is_not_batch_invariant(runner: Runner) -> None:
    """An operator's True with a half that is not batch-invariant, or with the compiled decode
    step, is refused naming both; unset, the leaf resolves off instead."""
    with pytest.raises(
        AttentionBackendUnavailableError,
        match="torch_native for the prefill half cannot serve deterministic "
        "inference: torch_native is not batch-invariant",
    ):
        runner(KernelBag(enable_deterministic_inference=True, prefill_attention_backend="torch_native"))
    with pytest.raises(
        UnsupportedConfigError, match="enable_torch_compile = True compiles it into a graph that rounds otherwise"
    ):
        runner(KernelBag(enable_deterministic_inference=True), graph=GraphBag(enable_torch_compile=True))


def test_stamp_is_what_the_factory_answers_and_never_recorded(runner: Runner) -> None:
    """A factory that builds something other than what was asked answers what it built; the runner
    carries that stamp while the published config still says what the operator asked.

    Reverse-verified: a runner that stamped `attention_backends()` instead of the factory's answer
    failed this test."""
    asked: list[tuple[str, str]] = []

    def falling_back(
        prefill: str, decode: str, *, device_type: str, is_draft_override: bool = False, batch_invariant: bool = False
    ) -> tuple[AttentionStamp, AttentionBackend]:
        asked.append((prefill, decode))
        return build_attention_pair("torch_native", "torch_native", device_type=device_type)

    built = runner(KernelBag(attention_backend="cpu_paged", prefill_attention_backend="auto"), falling_back)
    assert asked == [("auto", "cpu_paged")]
    assert built.attention_stamp == AttentionStamp("torch_native", "torch_native", False)
    assert attention_backends() == ("auto", "cpu_paged")
    assert published_bags().exec.kernel == KernelBag(attention_backend="cpu_paged", prefill_attention_backend="auto")
    assert StandaloneDriver(built).generate([[1, 2, 3]], 2)[0][0] >= 0


def test_a_kernel_that_cannot_run_here_is_refused_in_one_line(runner: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(
        AttentionBackendUnavailableError,
        match="triton for the decode half cannot run here: triton runs on a CPU only under TRITON_INTERPRET=1",
    ):
        runner(KernelBag(decode_attention_backend="triton"))
    with pytest.raises(
        AttentionBackendUnavailableError,
        match="flashinfer for the prefill half cannot run here: flashinfer runs on CUDA devices only",
    ):
        runner(KernelBag(attention_backend="flashinfer"))


@pytest.mark.parametrize(
    ("mode", "refusal"),
    [
        (
            "idle",
            "forward mode 'idle' is not served by this build.*accepted: extend, decode, mixed, target_verify, "
            "draft_extend",
        ),
        (
            "draft_extend",
            "forward mode 'draft_extend' is not a target runner's; a target verifies, a draft runner extends its "
            "drafts",
        ),
    ],
)
def test_forward_modes_a_target_runner_does_not_run_are_refused(runner: Runner, mode: str, refusal: str) -> None:
    """The modes exist in the vocabulary: idle is a data-parallel rank's empty step, which this
    build does not run; draft_extend is a draft runner's. A target runner refuses their batches,
    naming what it runs."""
    built = runner(KernelBag())

    class Moded:
        """The runner, handed each batch under `mode`."""

        pool = built.pool
        state_slots = built.state_slots

        def forward(self, batch: Batch) -> ForwardOutput:
            return built.forward(dataclasses.replace(batch, forward_mode=mode))  # type: ignore[arg-type]

    driver = StandaloneDriver(Moded())
    driver.add([1, 2, 3])
    with pytest.raises(BatchError, match=refusal):
        driver.step()


def test_a_compiled_decode_step_needs_a_traceable_decode_half(runner: Runner) -> None:
    """The compiled step asks the decode half, not the base field: a prefill-only triton is fine
    for it, a decode half of triton is refused. (TRITON_INTERPRET=1 in tests lets triton build on a CPU.)"""
    with pytest.raises(UnsupportedConfigError, match="its decode half runs triton, which torch.compile cannot trace"):
        runner(KernelBag(decode_attention_backend="triton"), graph=GraphBag(enable_torch_compile=True))
