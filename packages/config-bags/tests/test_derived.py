"""Derived helpers are pure over bags, and their accessors follow an override."""

import pytest

import config_bags
import config_bags.server
from config_bags.server import (
    Bags,
    ExecBag,
    GraphBag,
    KernelBag,
    MemoryBag,
    ModelBag,
    ParallelBag,
    ScheduleBag,
    SpecBag,
)


@pytest.mark.parametrize(
    ("kernel", "pair"),
    [
        (KernelBag(), ("auto", "auto")),
        (KernelBag(attention_backend="triton"), ("triton", "triton")),
        (KernelBag(prefill_attention_backend="flashinfer"), ("flashinfer", "auto")),
        (KernelBag(decode_attention_backend="triton"), ("auto", "triton")),
        (KernelBag(attention_backend="triton", prefill_attention_backend="flashinfer"), ("flashinfer", "triton")),
    ],
)
def test_attention_backends_apply_the_base_field_fallback(kernel: KernelBag, pair: tuple[str, str]) -> None:
    assert tuple(config_bags.server.attention_backends_of(kernel)) == pair


def test_a_split_only_launch_never_answers_from_the_unset_base_field(published: Bags) -> None:
    """The base field keeps its default (auto) here; every consumer asks the pair, which carries
    the split choice."""
    config_bags.override("startup", prefill_attention_backend="triton")
    assert config_bags.server.get_exec().kernel.attention_backend == "auto"
    assert config_bags.server.attention_backends().prefill == "triton"
    assert config_bags.server.attention_backends().decode == "auto"


@pytest.mark.parametrize(
    ("exec", "device_type", "on"),
    [
        (ExecBag(), "cpu", True),
        (ExecBag(), "cuda", False),
        (ExecBag(kernel=KernelBag(attention_backend="cpu_paged")), "cpu", True),
        (ExecBag(kernel=KernelBag(prefill_attention_backend="torch_native")), "cpu", False),
        (ExecBag(kernel=KernelBag(decode_attention_backend="triton")), "cpu", False),
        (ExecBag(graph=GraphBag(enable_torch_compile=True)), "cpu", False),
        (ExecBag(kernel=KernelBag(enable_deterministic_inference=False)), "cpu", False),
        (
            ExecBag(kernel=KernelBag(enable_deterministic_inference=True, attention_backend="torch_native")),
            "cuda",
            True,
        ),
    ],
)
def test_deterministic_inference_is_the_leaf_else_on_where_nothing_stands_against_it(
    exec: ExecBag, device_type: str, on: bool
) -> None:
    """Unset: on for a CPU whose halves are auto or cpu_paged and whose decode step is eager. Set:
    the operator's value (whether it can hold is the launch rule's and the runner's to refuse)."""
    assert config_bags.server.deterministic_inference_of(exec, device_type) is on


def test_linear_attn_backends_explicit_flag_wins_over_a_runner_default() -> None:
    kernel = KernelBag(linear_attn_backend="torch_native")
    assert config_bags.server.linear_attn_backends_of(kernel, "cpu", "flashinfer") == (
        "torch_native",
        "flashinfer",
        "flashinfer",
    )
    explicit = KernelBag(linear_attn_prefill_backend="triton")
    assert config_bags.server.linear_attn_backends_of(explicit, "cpu", "flashinfer").prefill == "triton"


@pytest.mark.parametrize(("device_type", "kernels"), [("cpu", "cpu_fused"), ("cuda", "triton")])
def test_linear_attn_backends_answer_what_the_device_runs(device_type: str, kernels: str) -> None:
    """Nothing named: the device's kernels, what every runner there stamps and runs. Reverse-verified:
    with the base default triton again (the answer this once gave whatever the device), the cpu case
    fails."""
    assert config_bags.server.linear_attn_backends_of(KernelBag(), device_type) == (kernels, kernels, kernels)


@pytest.mark.parametrize(
    ("schedule", "pp", "tokens"),
    [
        (ScheduleBag(max_prefill_tokens=4096, chunked_prefill_size=8192), 1, 8192),
        (ScheduleBag(max_prefill_tokens=4096, chunked_prefill_size=1024), 1, 4096),
        (ScheduleBag(max_prefill_tokens=4096, chunked_prefill_size=-1), 2, 8192),
    ],
)
def test_max_prefill_buffer_tokens_of(schedule: ScheduleBag, pp: int, tokens: int) -> None:
    assert config_bags.server.max_prefill_buffer_tokens_of(schedule, ParallelBag(pp_size=pp)) == tokens


def test_max_speculative_num_draft_tokens_of() -> None:
    assert config_bags.server.max_speculative_num_draft_tokens_of(SpecBag()) == 0
    assert (
        config_bags.server.max_speculative_num_draft_tokens_of(
            SpecBag(speculative_algorithm="ngram", speculative_num_draft_tokens=8)
        )
        == 8
    )
    draft = SpecBag(
        speculative_algorithm="draft_model",
        speculative_draft_model_path="/m",
        speculative_num_steps=2,
        speculative_num_draft_tokens=8,
    )
    assert config_bags.server.max_speculative_num_draft_tokens_of(draft) == 3


def test_cuda_graph_decode_bs_of() -> None:
    assert config_bags.server.cuda_graph_decode_bs_of(GraphBag(cuda_graph_max_bs=20)) == (1, 2, 4, 8, 16, 20)
    assert config_bags.server.cuda_graph_decode_bs_of(GraphBag(cuda_graph_max_bs=2)) == (1, 2)
    assert config_bags.server.cuda_graph_decode_bs_of(GraphBag(cuda_graph_decode_bs=(3, 5))) == (3, 5)


def test_max_total_tokens_and_context_length_of() -> None:
    assert config_bags.server.max_total_tokens_of(MemoryBag(kv_cache_memory_mb=1), 1024) == 1024
    assert config_bags.server.max_total_tokens_of(MemoryBag(max_total_tokens=77), 1024) == 77
    with pytest.raises(ValueError, match="kv_bytes_per_token = 0 is not accepted; accepted: an int >= 1"):
        config_bags.server.max_total_tokens_of(MemoryBag(), 0)
    assert config_bags.server.context_length_of(ModelBag(), 2048) == 2048
    assert config_bags.server.context_length_of(ModelBag(context_length=512), 2048) == 512
    with pytest.raises(
        config_bags.LeafValueError,
        match="context_length = 4096 requires context_length <= the model's maximum, got maximum = 2048 tokens",
    ):
        config_bags.server.context_length_of(ModelBag(context_length=4096), 2048)


def test_chunk_size_is_page_aligned() -> None:
    assert config_bags.server.chunk_size_of(ScheduleBag(chunked_prefill_size=100, page_size=16)) == 96
    assert config_bags.server.chunk_size_of(ScheduleBag(chunked_prefill_size=10, page_size=16)) == 16
    assert config_bags.server.chunk_size_of(ScheduleBag(chunked_prefill_size=-1)) is None


def test_derived_accessors_follow_an_override(published: Bags) -> None:
    assert config_bags.server.max_prefill_buffer_tokens() == 16384
    config_bags.override("admin", max_prefill_tokens=1024, chunked_prefill_size=512)
    assert config_bags.server.max_prefill_buffer_tokens() == 1024
    assert config_bags.server.chunk_size() == 512
    config_bags.override("startup", speculative_algorithm="ngram", speculative_num_draft_tokens=5, cuda_graph_max_bs=4)
    assert config_bags.server.max_speculative_num_draft_tokens() == 5
    assert config_bags.server.cuda_graph_decode_bs() == (1, 2, 4)
    assert config_bags.server.linear_attn_backends("cpu").decode == "cpu_fused"
    config_bags.override("admin", linear_attn_backend="torch_native")
    assert config_bags.server.linear_attn_backends("cpu").decode == "torch_native"


def test_mamba_cache_slots_of() -> None:
    from config_bags.server import MambaBag, ScheduleBag

    assert config_bags.server.mamba_cache_slots_of(MambaBag(), ScheduleBag(max_running_requests=12)) == 12
    assert (
        config_bags.server.mamba_cache_slots_of(MambaBag(max_mamba_cache_size=5), ScheduleBag(max_running_requests=12))
        == 5
    )
