"""The resolution pipeline over tiny real checkpoints (a transformers config.json written by
LlamaConfig.save_pretrained): each handler, provenance, hard requirements, determinism, the
dump and explain outputs, and provenance that follows a post-publish override."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from config_bags import ColdLeafError, UnknownLeafError, begin_serving, leaf_specs, override, publish
from config_bags.server import Bags
from serve.main import main
from serve.record import ResolutionError, ResolvedArgs, ServerArgs, handler_names, launch_request, resolve

LAYERS, KV_HEADS, HEAD_DIM, MAX_POSITIONS = 2, 2, 16, 512
BF16_BYTES_PER_TOKEN = 2 * LAYERS * KV_HEADS * HEAD_DIM * 2  # K and V, every layer, bf16


pytestmark = pytest.mark.usefixtures("unpublished")


def resolved(model: Path, **leaves: object) -> ResolvedArgs:
    return resolve(ServerArgs(model_path=str(model), **leaves))


def test_handlers_are_named_and_ordered() -> None:
    names = handler_names()
    assert names[:7] == (
        "absent_features",
        "attention_backends_run_here",
        "compiled_decode_traceable",
        "deterministic_inference",
        "speculation_as_built",
        "draft_attention_runs_here",
        "default_model",
    )
    assert (
        names.index("context_length")
        < names.index("draft_model")
        < names.index("max_total_tokens")
        < names.index("chunked_prefill_size")
    )
    assert names.index("max_total_tokens") < names.index("max_prefill_tokens") < names.index("max_running_requests")


def test_model_leaves_come_from_the_checkpoint(tiny_model: Path) -> None:
    args = resolved(tiny_model).server_args
    assert (args.context_length, args.provenance_of("context_length")) == (MAX_POSITIONS, "resolved:context_length")
    assert (args.served_model_name, args.provenance_of("served_model_name")) == (
        "tiny-llama",
        "resolved:served_model_name",
    )
    assert (args.tokenizer_path, args.provenance_of("tokenizer_path")) == (str(tiny_model), "resolved:tokenizer_path")
    assert args.provenance_of("model_path") == "cli"


def test_an_operator_context_length_is_kept_within_the_models_maximum(tiny_model: Path) -> None:
    args = resolved(tiny_model, context_length=128).server_args
    assert (args.context_length, args.provenance_of("context_length")) == (128, "cli")
    with pytest.raises(
        ResolutionError,
        match=r"^context_length = 4096 requires context_length <= the model's maximum, got maximum = 512 tokens "
        r"\(rule context_length_within_model; from assigned 4096\)$",
    ):
        resolved(tiny_model, context_length=4096)


@pytest.mark.parametrize(
    ("leaves", "bytes_per_token"),
    [
        ({}, BF16_BYTES_PER_TOKEN),
        ({"dtype": "float32", "kv_cache_dtype": "bfloat16"}, BF16_BYTES_PER_TOKEN),
        ({"dtype": "float32"}, 2 * BF16_BYTES_PER_TOKEN),
        # A tensor-parallel rank's pool holds its KV heads: one of the two over 2 ranks, one replicated over 4.
        ({"tp_size": 2}, BF16_BYTES_PER_TOKEN // 2),
        ({"tp_size": 4}, BF16_BYTES_PER_TOKEN // 2),
    ],
)
def test_max_total_tokens_from_the_per_token_kv_size(
    tiny_model: Path, leaves: dict[str, object], bytes_per_token: int
) -> None:
    args = resolved(tiny_model, kv_cache_memory_mb=3, **leaves).server_args
    assert args.max_total_tokens == 3 * 1024 * 1024 // bytes_per_token
    assert args.provenance_of("max_total_tokens") == "resolved:max_total_tokens"


@pytest.mark.parametrize(
    ("leaf", "feature"),
    [
        ("pp_size", "pipeline parallelism"),
        (
            "ep_size",
            r"mixture-of-experts kernel choice or expert parallelism \(sparse layers run each expert in torch\)",
        ),
    ],
)
def test_a_split_across_devices_is_refused_not_ignored(tiny_model: Path, leaf: str, feature: str) -> None:
    """No runner splits the layers over pipeline stages or experts over ranks. Reverse-verified:
    without the absent_features handler (and the final rules check), pp_size=2 resolved silently."""
    with pytest.raises(
        ResolutionError,
        match=(
            rf"^{leaf} = 2: this build has no {feature}; accepted: 1 \(the default\) "
            r"\(rule absent_.*; from assigned 2\)$"
        ),
    ):
        resolved(tiny_model, **{leaf: 2})


def test_max_total_tokens_is_whole_pages_and_an_operator_value_wins(tiny_model: Path) -> None:
    """Reverse-verified: with `declare` no longer skipping operator-set leaves, the operator's
    1000 is overwritten and this test fails (so do three others here)."""
    args = resolved(tiny_model, kv_cache_memory_mb=1, page_size=64, dtype="float32").server_args
    assert args.max_total_tokens == 1024 * 1024 // (2 * BF16_BYTES_PER_TOKEN) // 64 * 64
    kept = resolved(tiny_model, max_total_tokens=1000).server_args
    assert (kept.max_total_tokens, kept.provenance_of("max_total_tokens")) == (1000, "cli")


def test_chunked_prefill_size_follows_the_pool_and_the_context(tiny_model: Path) -> None:
    small_pool = resolved(tiny_model, kv_cache_memory_mb=1, dtype="float32", context_length=4096 // 8).server_args
    assert small_pool.max_total_tokens == 2048
    assert (small_pool.chunked_prefill_size, small_pool.provenance_of("chunked_prefill_size")) == (
        512,
        "resolved:chunked_prefill_size",
    )
    tiny_pool = resolved(tiny_model, kv_cache_memory_mb=1, tp_size=1, page_size=16, dtype="float32").server_args
    assert tiny_pool.chunked_prefill_size == 2048 // 4
    off = resolved(tiny_model, chunked_prefill_size=-1).server_args
    assert (off.chunked_prefill_size, off.chunk_size) == (-1, None)
    mine = resolved(tiny_model, kv_cache_memory_mb=1, chunked_prefill_size=1000).server_args
    assert (mine.chunked_prefill_size, mine.provenance_of("chunked_prefill_size")) == (1000, "cli")


def test_max_running_requests_never_exceeds_the_pages(tiny_model: Path) -> None:
    args = resolved(tiny_model, kv_cache_memory_mb=1, dtype="float32", page_size=16).server_args
    assert args.max_total_tokens == 2048
    assert (args.max_running_requests, args.provenance_of("max_running_requests")) == (
        128,
        "resolved:max_running_requests",
    )
    roomy = resolved(tiny_model).server_args
    assert roomy.max_running_requests == leaf_specs(Bags)["max_running_requests"].default


def test_a_cpu_step_prefills_at_most_512_prompt_tokens(tiny_model: Path) -> None:
    """Reverse-verified: dropping the handler from HANDLERS fails the first assertion."""
    cpu = resolved(tiny_model, device="cpu").server_args
    assert (cpu.max_prefill_tokens, cpu.provenance_of("max_prefill_tokens")) == (512, "resolved:max_prefill_tokens")
    mine = resolved(tiny_model, device="cpu", max_prefill_tokens=4096).server_args
    assert (mine.max_prefill_tokens, mine.provenance_of("max_prefill_tokens")) == (4096, "cli")


def test_speculation_on_a_cpu_limits_the_verify_batch_and_its_drafts(tiny_model: Path) -> None:
    """Reverse-verified: dropping speculative_max_drafts_per_step from HANDLERS fails the first assertion."""
    cpu = resolved(tiny_model, device="cpu", speculative_algorithm="ngram").server_args
    assert (cpu.speculative_disable_by_batch_size, cpu.speculative_max_drafts_per_step) == (4, 8)
    assert cpu.provenance_of("speculative_max_drafts_per_step") == "resolved:speculative_max_drafts_per_step"
    mine = resolved(
        tiny_model, device="cpu", speculative_algorithm="ngram", speculative_max_drafts_per_step=3
    ).server_args
    assert (mine.speculative_max_drafts_per_step, mine.provenance_of("speculative_max_drafts_per_step")) == (3, "cli")
    off = resolved(tiny_model, device="cpu").server_args
    assert (off.speculative_disable_by_batch_size, off.speculative_max_drafts_per_step) == (None, None)


REFUSALS_ON_A_CPU = {
    "triton": (
        "triton runs on a CPU only under TRITON_INTERPRET=1 (its interpreter, for tests); on a CPU use "
        "torch_native, cpu_paged or auto"
    ),
    "flashinfer": "flashinfer runs on CUDA devices only, not on cpu; here use torch_native, cpu_paged or auto",
}


@pytest.mark.parametrize("leaf", ["attention_backend", "prefill_attention_backend", "decode_attention_backend"])
@pytest.mark.parametrize("backend", ["triton", "flashinfer"])
def test_an_attention_backend_that_cannot_run_here_is_refused_naming_those_that_can(
    tiny_model: Path, leaf: str, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reverse-verified: without the attention_backends_run_here handler and the final rules
    check, `--attention-backend triton` resolved and the scheduler process then died with
    AttentionBackendUnavailableError."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(
        ResolutionError,
        match=rf"^{leaf} = {backend}: {re.escape(REFUSALS_ON_A_CPU[backend])} "
        r"\(rule attention_backends_run_here; from assigned",
    ):
        resolved(tiny_model, device="cpu", **{leaf: backend})


def test_auto_and_the_alias_resolve_on_a_cpu(tiny_model: Path) -> None:
    for name in ("auto", "intel_amx", "cpu_paged", "torch_native"):
        assert resolved(tiny_model, device="cpu", attention_backend=name).server_args.attention_backend == name


def test_the_split_pair_is_never_filled_from_the_base_field(tiny_model: Path) -> None:
    args = resolved(tiny_model, attention_backend="cpu_paged").server_args
    assert (args.prefill_attention_backend, args.decode_attention_backend) == (None, None)
    assert args.attention_backends == ("cpu_paged", "cpu_paged")


def test_every_absent_feature_is_refused_when_set_off_its_default(tiny_model: Path) -> None:
    """One leaf of each absent feature, set off its default, is refused at resolution with the
    feature and the accepted value. Reverse-verified: with the pipeline-parallelism row removed
    from ABSENT_FEATURES, `pp_size=2` resolved."""
    cases = {
        "pp_size": (2, "pipeline parallelism", "1"),
        "disable_cuda_graph": (True, "CUDA-graph capture", "False"),
        "moe_runner_backend": ("triton", "mixture-of-experts kernel choice or expert parallelism", "'auto'"),
        "enable_two_batch_overlap": (True, "two-batch overlap", "False"),
        "disaggregation_mode": ("prefill", "prefill/decode disaggregation", "'null'"),
        "enable_hierarchical_cache": (True, "hierarchical \\(host-memory\\) KV cache", "False"),
        "mm_max_items_per_request": (2, "multimodal model", "8"),
    }
    for leaf, (value, feature, default) in cases.items():
        with pytest.raises(
            ResolutionError,
            match=rf"^{leaf} = {value!r}: this build has no {feature}.*; accepted: {default} \(the default\)",
        ):
            resolved(tiny_model, **{leaf: value})


def test_the_bundled_default_model_when_model_path_is_unset(tiny_model: Path) -> None:
    result = resolve(ServerArgs(), default_model=lambda: tiny_model).server_args
    assert (result.model_path, result.provenance_of("model_path")) == (str(tiny_model), "resolved:default_model")
    assert result.context_length == MAX_POSITIONS


def test_a_checkpoint_without_config_json_is_named(tmp_path: Path) -> None:
    with pytest.raises(ResolutionError, match=rf"model_path {tmp_path}: no config.json in {tmp_path}"):
        resolve(ServerArgs(model_path=str(tmp_path)))
    (tmp_path / "config.json").write_text(
        '{"architectures": ["LlamaForCausalLM"], "num_attention_heads": 4, "hidden_size": 64}'
    )
    with pytest.raises(ResolutionError, match=r"config.json lacks required key 'vocab_size'"):
        resolve(ServerArgs(model_path=str(tmp_path)))


def test_bags_that_do_not_validate_fail_resolution_naming_the_leaf(tiny_model: Path) -> None:
    """A draft_model launch without a draft path names speculative_draft_model_path (it had blamed
    "context_length (from )"). Reverse-verified: with the context_length handler projecting the
    record itself and labelling every error its own, the message named context_length again."""
    with pytest.raises(
        ResolutionError, match="SpecBag.speculative_algorithm = 'draft_model' requires speculative_draft_model_path"
    ):
        resolved(tiny_model, speculative_algorithm="draft_model")


def test_resolution_is_deterministic(tiny_model: Path, tmp_path: Path) -> None:
    """The same input resolves to the same record, provenance, declarations and dump, whatever
    the order of the environment."""
    config = tmp_path / "c.yaml"
    config.write_text("kv-cache-memory-mb: 2\nschedule-policy: lpm\n")
    environ = {"SERVE_MODEL_PATH": str(tiny_model), "SERVE_MAX_N": "4", "SERVE_PORT": "9000"}
    results = []
    for env in (environ, dict(reversed(list(environ.items())))):
        request = launch_request(["--config", str(config), "--page-size", "32"], env)
        results.append(resolve(request.server_args))
    first, second = results
    assert first.server_args == second.server_args
    assert first.declarations == second.declarations
    assert first.dump() == second.dump()


def test_dump_config_prints_every_leaf_with_provenance(tiny_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--model-path", str(tiny_model), "--page-size", "4", "--dump-config"]) == 0
    dump = json.loads(capsys.readouterr().out)
    assert set(dump["leaves"]) == set(leaf_specs(Bags))
    assert dump["leaves"]["page_size"] == {
        "bag": "schedule",
        "value": 4,
        "provenance": "cli",
        "origin": "--page-size 4",
    }
    assert dump["leaves"]["context_length"]["provenance"] == "resolved:context_length"
    assert dump["leaves"]["port"]["provenance"] == "default"
    assert dump["derived"]["attention_backends"] == {"prefill": "auto", "decode": "auto"}
    assert any(d["handler"] == "max_total_tokens" and d["applied"] for d in dump["resolution"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="what a CPU host runs; a CUDA host runs triton")
def test_dump_config_shows_configured_and_effective_linear_attention(
    tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a CPU, nothing named: configured says nothing, effective says cpu_fused, what every runner
    there stamps and runs (this once said triton). Reverse-verified: the base default triton again
    fails it."""
    assert main(["--model-path", str(tiny_model), "--device", "cpu", "--dump-config"]) == 0
    linear = json.loads(capsys.readouterr().out)["derived"]["linear_attn_backends"]
    assert linear["configured"] == {"base": None, "prefill": None, "decode": None} and linear["device_type"] == "cpu"
    assert linear["effective"] == {"decode": "cpu_fused", "prefill": "cpu_fused", "verify": "cpu_fused"}


def test_explain_says_how_a_leaf_got_its_value(tiny_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--model-path", str(tiny_model), "--explain", "max-total-tokens", "--kv-cache-memory-mb", "1"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"max_total_tokens = {1024 * 1024 // BF16_BYTES_PER_TOKEN}\n")
    assert "provenance: resolved:max_total_tokens" in text
    assert "KV slots that fit kv_cache_memory_mb" in text


def test_a_resolution_conflict_exits_2_on_one_line(tiny_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--model-path", str(tiny_model), "--context-length", "100000", "--dump-config"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "context_length" in err[0] and "512" in err[0]


def test_provenance_follows_a_post_publish_override(tiny_model: Path) -> None:
    result = resolved(tiny_model)
    publish(result.bags(), role="launcher")
    override("admin", max_n=4)
    assert result.provenance()["max_n"] == "override:admin"
    assert result.dump()["leaves"]["max_n"]["value"] == 4
    assert result.server_args.max_n == 16, "the sealed record keeps what it resolved to"


def test_a_refused_override_changes_neither_bags_nor_dump(tiny_model: Path) -> None:
    result = resolved(tiny_model)
    publish(result.bags(), role="launcher")
    begin_serving()
    before = result.dump()
    with pytest.raises(ColdLeafError, match="page_size"):
        override("admin", max_n=2, page_size=64)
    with pytest.raises(UnknownLeafError, match="did you mean page_size"):
        override("admin", pagesize=64)
    assert result.dump() == before
    assert result.provenance()["max_n"] == "default"
