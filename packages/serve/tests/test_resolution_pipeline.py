"""The resolution pipeline over tiny real checkpoints (a transformers config.json written by
LlamaConfig.save_pretrained): each handler, provenance, hard requirements, determinism, the
dump and explain outputs, and provenance that follows a post-publish override."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from config_bags import ColdLeafError, UnknownLeafError, begin_serving, leaf_specs, override, publish, unpublish

from serve.main import main
from serve.record import ResolutionError, ResolvedArgs, ServerArgs, handler_names, launch_request, resolve

LAYERS, KV_HEADS, HEAD_DIM, MAX_POSITIONS = 2, 2, 16, 512
BF16_BYTES_PER_TOKEN = 2 * LAYERS * KV_HEADS * HEAD_DIM * 2  # K and V, every layer, bf16


@pytest.fixture(autouse=True)
def _unpublished() -> Iterator[None]:
    unpublish()
    yield
    unpublish()


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import LlamaConfig

    path = tmp_path_factory.mktemp("models") / "tiny-llama"
    LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        vocab_size=256,
        dtype="bfloat16",
        architectures=["LlamaForCausalLM"],
    ).save_pretrained(path)
    return path


def resolved(model: Path, **leaves: object) -> ResolvedArgs:
    return resolve(ServerArgs(model_path=str(model), **leaves))


def test_handlers_are_named_and_ordered() -> None:
    names = handler_names()
    assert names[:2] == ("one_device", "default_model")
    assert names.index("page_size_for_backend") < names.index("max_total_tokens") < names.index("chunked_prefill_size")
    assert names.index("speculative_defaults") < names.index("page_size_for_backend")


def test_model_leaves_come_from_the_checkpoint(tiny_model: Path) -> None:
    args = resolved(tiny_model).server_args
    assert (args.context_length, args.provenance_of("context_length")) == (MAX_POSITIONS, "resolved:context_length")
    assert (args.served_model_name, args.provenance_of("served_model_name")) == ("tiny-llama", "resolved:served_model_name")
    assert (args.tokenizer_path, args.provenance_of("tokenizer_path")) == (str(tiny_model), "resolved:tokenizer_path")
    assert args.provenance_of("model_path") == "cli"


def test_an_operator_context_length_is_kept_within_the_models_maximum(tiny_model: Path) -> None:
    args = resolved(tiny_model, context_length=128).server_args
    assert (args.context_length, args.provenance_of("context_length")) == (128, "cli")
    with pytest.raises(ResolutionError, match=r"context_length .*exceeds the model's maximum of 512"):
        resolved(tiny_model, context_length=4096)


@pytest.mark.parametrize(
    ("leaves", "bytes_per_token"),
    [
        ({}, BF16_BYTES_PER_TOKEN),
        ({"kv_cache_dtype": "float32"}, 2 * BF16_BYTES_PER_TOKEN),
        ({"dtype": "float32"}, 2 * BF16_BYTES_PER_TOKEN),
    ],
)
def test_max_total_tokens_from_the_per_token_kv_size(tiny_model: Path, leaves: dict[str, object], bytes_per_token: int) -> None:
    args = resolved(tiny_model, kv_cache_memory_mb=3, **leaves).server_args
    assert args.max_total_tokens == 3 * 1024 * 1024 // bytes_per_token
    assert args.provenance_of("max_total_tokens") == "resolved:max_total_tokens"


@pytest.mark.parametrize("leaf", ["tp_size", "pp_size", "dp_size", "nnodes", "ep_size"])
def test_a_split_across_devices_is_refused_not_ignored(tiny_model: Path, leaf: str) -> None:
    """The runner holds the whole model on one device. Reverse-verified: without the one_device
    handler, tp_size=2 resolved silently."""
    with pytest.raises(ResolutionError, match=rf"{leaf}=2 \(from assigned 2\) is refused by one_device: this build runs the whole model in one process on one device; accepted: 1"):
        resolved(tiny_model, **{leaf: 2, **({"node_rank": 0} if leaf == "nnodes" else {})})


def test_max_total_tokens_is_whole_pages_and_an_operator_value_wins(tiny_model: Path) -> None:
    """Reverse-verified: with `declare` no longer skipping operator-set leaves, the operator's
    1000 is overwritten and this test fails (so do three others here)."""
    args = resolved(tiny_model, kv_cache_memory_mb=1, page_size=64, kv_cache_dtype="float32").server_args
    assert args.max_total_tokens == 1024 * 1024 // (2 * BF16_BYTES_PER_TOKEN) // 64 * 64
    kept = resolved(tiny_model, max_total_tokens=1000).server_args
    assert (kept.max_total_tokens, kept.provenance_of("max_total_tokens")) == (1000, "cli")


def test_chunked_prefill_size_follows_the_pool_and_the_context(tiny_model: Path) -> None:
    small_pool = resolved(tiny_model, kv_cache_memory_mb=1, kv_cache_dtype="float32", context_length=4096 // 8).server_args
    assert small_pool.max_total_tokens == 2048
    assert (small_pool.chunked_prefill_size, small_pool.provenance_of("chunked_prefill_size")) == (512, "resolved:chunked_prefill_size")
    tiny_pool = resolved(tiny_model, kv_cache_memory_mb=1, kv_cache_dtype="float32", tp_size=1, page_size=16, dtype="float32").server_args
    assert tiny_pool.chunked_prefill_size == 2048 // 4
    off = resolved(tiny_model, chunked_prefill_size=-1).server_args
    assert (off.chunked_prefill_size, off.chunk_size) == (-1, None)
    mine = resolved(tiny_model, kv_cache_memory_mb=1, chunked_prefill_size=1000).server_args
    assert (mine.chunked_prefill_size, mine.provenance_of("chunked_prefill_size")) == (1000, "cli")


def test_max_running_requests_never_exceeds_the_pages(tiny_model: Path) -> None:
    args = resolved(tiny_model, kv_cache_memory_mb=1, kv_cache_dtype="float32", page_size=16).server_args
    assert args.max_total_tokens == 2048
    assert (args.max_running_requests, args.provenance_of("max_running_requests")) == (128, "resolved:max_running_requests")
    roomy = resolved(tiny_model).server_args
    assert roomy.max_running_requests == leaf_specs()["max_running_requests"].default


def test_a_cpu_step_prefills_at_most_512_prompt_tokens(tiny_model: Path) -> None:
    """Reverse-verified: dropping the handler from HANDLERS fails the first assertion."""
    cpu = resolved(tiny_model, device="cpu").server_args
    assert (cpu.max_prefill_tokens, cpu.provenance_of("max_prefill_tokens")) == (512, "resolved:max_prefill_tokens")
    mine = resolved(tiny_model, device="cpu", max_prefill_tokens=4096).server_args
    assert (mine.max_prefill_tokens, mine.provenance_of("max_prefill_tokens")) == (4096, "cli")


def test_page_size_implied_by_the_attention_backend(tiny_model: Path) -> None:
    implied = resolved(tiny_model, decode_attention_backend="flashinfer").server_args
    assert (implied.page_size, implied.provenance_of("page_size")) == (16, "resolved:page_size_for_backend")
    mine = resolved(tiny_model, attention_backend="flashinfer", page_size=8).server_args
    assert (mine.page_size, mine.provenance_of("page_size")) == (8, "cli")
    with pytest.raises(ResolutionError, match=r"page_size=12 \(from assigned 12\) is refused by page_size_for_backend: .*power of two"):
        resolved(tiny_model, attention_backend="triton", page_size=12)


def test_flashinfer_is_refused_on_a_cpu_device_for_the_half_that_runs_it(tiny_model: Path) -> None:
    with pytest.raises(ResolutionError, match=r"attention_backend='flashinfer' .*the prefill half would run flashinfer"):
        resolved(tiny_model, device="cpu", attention_backend="flashinfer")
    with pytest.raises(ResolutionError, match=r"decode_attention_backend='flashinfer'"):
        resolved(tiny_model, device="cpu", decode_attention_backend="flashinfer")
    both_split = resolved(
        tiny_model, device="cpu", attention_backend="flashinfer", prefill_attention_backend="triton", decode_attention_backend="torch_native"
    ).server_args
    assert both_split.attention_backends == ("triton", "torch_native")
    assert both_split.prefill_attention_backend == "triton" and both_split.attention_backend == "flashinfer"


def test_the_split_pair_is_never_filled_from_the_base_field(tiny_model: Path) -> None:
    args = resolved(tiny_model, attention_backend="triton").server_args
    assert (args.prefill_attention_backend, args.decode_attention_backend) == (None, None)
    assert args.attention_backends == ("triton", "triton")


def test_speculative_defaults_and_the_draft_tree_page_requirement(tiny_model: Path) -> None:
    """Reverse-verified: with `require` no longer raising on a conflicting operator value, the
    page_size=16 launch resolves and this test fails."""
    chain = resolved(tiny_model, speculative_algorithm="draft_model", speculative_draft_model_path=str(tiny_model)).server_args
    assert (chain.speculative_num_draft_tokens, chain.provenance_of("speculative_num_draft_tokens")) == (4, "resolved:speculative_defaults")
    tree = resolved(
        tiny_model,
        speculative_algorithm="draft_model",
        speculative_draft_model_path=str(tiny_model),
        speculative_eagle_topk=2,
        attention_backend="flashinfer",
    ).server_args
    assert tree.speculative_num_draft_tokens == 3 * 2 + 1
    assert (tree.page_size, tree.provenance_of("page_size")) == (1, "resolved:speculative_defaults"), "a requirement outranks a soft default"
    with pytest.raises(ResolutionError, match=r"page_size=16 \(from assigned 16\) conflicts with speculative_defaults: draft trees"):
        resolved(tiny_model, speculative_algorithm="draft_model", speculative_draft_model_path="d", speculative_eagle_topk=2, page_size=16)


def test_the_bundled_default_model_when_model_path_is_unset(tiny_model: Path) -> None:
    result = resolve(ServerArgs(), default_model=lambda: tiny_model).server_args
    assert (result.model_path, result.provenance_of("model_path")) == (str(tiny_model), "resolved:default_model")
    assert result.context_length == MAX_POSITIONS


def test_a_checkpoint_without_config_json_is_named(tmp_path: Path) -> None:
    with pytest.raises(ResolutionError, match=rf"model_path {tmp_path}: no config.json in {tmp_path}"):
        resolve(ServerArgs(model_path=str(tmp_path)))
    (tmp_path / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "num_attention_heads": 4, "hidden_size": 64}')
    with pytest.raises(ResolutionError, match=r"config.json lacks required key 'vocab_size'"):
        resolve(ServerArgs(model_path=str(tmp_path)))


def test_bags_that_do_not_validate_fail_resolution(tiny_model: Path) -> None:
    with pytest.raises(ResolutionError, match="draft_model needs speculative_draft_model_path"):
        resolved(tiny_model, speculative_algorithm="draft_model")


def test_resolution_is_deterministic(tiny_model: Path, tmp_path: Path) -> None:
    """The same input resolves to the same record, provenance, declarations and dump, whatever
    the order of the environment."""
    config = tmp_path / "c.yaml"
    config.write_text("kv-cache-memory-mb: 2\nattention-backend: flashinfer\n")
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
    assert set(dump["leaves"]) == set(leaf_specs())
    assert dump["leaves"]["page_size"] == {"bag": "schedule", "value": 4, "provenance": "cli", "origin": "--page-size 4"}
    assert dump["leaves"]["context_length"]["provenance"] == "resolved:context_length"
    assert dump["leaves"]["port"]["provenance"] == "default"
    assert dump["derived"]["attention_backends"] == {"prefill": "torch_native", "decode": "torch_native"}
    assert any(d["handler"] == "max_total_tokens" and d["applied"] for d in dump["resolution"])


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
