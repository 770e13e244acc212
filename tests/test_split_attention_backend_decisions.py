"""Every decision that depends on an attention backend asks the half it is about.

A launch that names only one split field (`--prefill-attention-backend` or
`--decode-attention-backend`) leaves the base field at its default, `auto`; a decision that read
the base field would answer from a value the operator never gave. The callable decisions are
called here under such split-only publishes and must answer from the right half. The rest are
pinned statically: the only code that reads the base field is the fallback itself
(`attention_leaf_of`) and the rules that list the leaves they read, in BASE_FIELD_READERS with
why; any other read fails `test_no_other_code_reads_the_base_field`.

The decisions, and the half each asks:
- resolution and every publish: `attention_backends_run_here` (each half's kernel runs on this
  host), `compiled_decode_traceable` (the decode half), `attention_page_size` (every half that runs:
  the page size both kernels tile);
- the runner: the pair it builds and stamps (both halves, from `attention_backends()`); the compiled
  decode gate (the stamp's decode half); its warm-up (an extend for the prefill half, a decode for
  the decode half: by construction, through the forward modes);
- the hybrid container and `serving_attention_backend` (the half the forward mode dispatches to;
  tests in attn-backends pin that they agree);
- the KV layout: no decision. Every kernel reads the one pool layout [kv_heads, slots, head_dim]
  (flashinfer through a strided HND view of it), so no half changes it;
- the scheduler: none. It batches by forward mode and never asks which kernel runs.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from attn_backends import AttentionStamp, build_attention_pair, refusal_on, serving_attention_backend
from config_bags import broken_rule, publish, unpublish
from config_bags.server import INVARIANTS, Bags, ExecBag, GraphBag, KernelBag, ScheduleBag, attention_backends
from runtime_runner.errors import UnsupportedConfigError
from runtime_runner.models.compiled_decode import check_compiled_decode_traceable
from serve.launch_rules import ATTENTION_BACKENDS_RUN_HERE, COMPILED_DECODE_TRACEABLE

ROOT = Path(__file__).resolve().parents[1]

# Code that reads the base field `attention_backend`, and why it may.
BASE_FIELD_READERS = {
    "packages/config-bags/src/config_bags/server/derived.py": (
        "attention_leaf_of is the fallback itself (split field, else base); every half's reader goes through it"
    ),
    "packages/config-bags/src/config_bags/server/root.py": "the page-size rule lists the leaves it reads",
    "packages/serve/src/serve/launch_rules.py": "the launch rules list the leaves they read",
}


def split_only(**fields: object) -> Bags:
    """Bags with only the given kernel fields set (the base field left at auto), and graph/schedule extras."""
    graph = GraphBag(enable_torch_compile=bool(fields.pop("compile", False)))
    page = int(fields.pop("page_size", 1))  # type: ignore[call-overload]
    return Bags(exec=ExecBag(kernel=KernelBag(**fields), graph=graph), schedule=ScheduleBag(page_size=page))  # type: ignore[arg-type]


@pytest.fixture
def interpreted(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    yield


def test_the_compiled_decode_rule_asks_the_decode_half(interpreted: None) -> None:
    """Reverse-verified: reading the base field (auto, which builds cpu_paged) in the rule accepted
    the decode-only triton launch."""
    refused = broken_rule(split_only(decode_attention_backend="triton", compile=True), (COMPILED_DECODE_TRACEABLE,))
    assert refused is not None and "got decode_attention_backend = triton" in refused[1]
    assert (
        broken_rule(split_only(prefill_attention_backend="triton", compile=True), (COMPILED_DECODE_TRACEABLE,)) is None
    )


def test_the_runners_compiled_decode_gate_asks_the_stamps_decode_half(interpreted: None) -> None:
    publish(split_only(decode_attention_backend="triton"), role="standalone")
    try:
        stamp, _ = build_attention_pair(*attention_backends(), device_type="cpu")
        assert stamp == AttentionStamp("torch_native", "triton", False)
        with pytest.raises(UnsupportedConfigError, match="decode half runs triton"):
            check_compiled_decode_traceable(stamp)
        check_compiled_decode_traceable(AttentionStamp("triton", "cpu_paged", False))
    finally:
        unpublish()


@pytest.mark.parametrize("half", ["prefill", "decode"])
def test_the_host_rule_asks_each_half_and_names_its_leaf(half: str) -> None:
    """Reverse-verified: checking only the base field accepted both flashinfer launches on this CPU."""
    refused = broken_rule(split_only(**{f"{half}_attention_backend": "flashinfer"}), (ATTENTION_BACKENDS_RUN_HERE,))
    assert refused is not None and refused[1].startswith(
        f"{half}_attention_backend = flashinfer: flashinfer runs on CUDA devices only"
    )


def test_the_page_size_rule_asks_every_half_that_runs() -> None:
    refused = broken_rule(split_only(decode_attention_backend="triton", page_size=3), INVARIANTS)
    assert (
        refused is not None
        and "decode_attention_backend = triton requires page_size to be a power of two" in refused[1]
    )
    assert broken_rule(split_only(decode_attention_backend="torch_native", page_size=3), INVARIANTS) is None


def test_the_pair_and_serving_attention_backend_answer_each_half() -> None:
    """A prefill-only launch: the decode half keeps auto's kernel for this host, and a forward
    asks the half its mode dispatches to; without a stamp, a half still at auto answers nothing
    (never a guess from the base field)."""
    publish(split_only(prefill_attention_backend="cpu_paged"), role="standalone")
    try:
        stamp, _ = build_attention_pair(*attention_backends(), device_type="cpu")
        assert stamp == AttentionStamp("cpu_paged", "cpu_paged", False)
        assert [serving_attention_backend(mode, stamp) for mode in ("extend", "decode")] == ["cpu_paged", "cpu_paged"]
        assert serving_attention_backend("mixed", None) == "cpu_paged"
        with pytest.raises(ValueError, match="configured as 'auto'"):
            serving_attention_backend("decode", None)
    finally:
        unpublish()


def test_a_capability_check_never_answers_for_a_name_that_is_not_a_kernel() -> None:
    """The trap the history names (`supports_x(None) is True`): refusal_on answers only for kernel
    names, so auto or an alias can never read as "runs here".

    Reverse-verified: without the kernel-name check, refusal_on("auto", "cpu") answered
    flashinfer's refusal, and refusal_on("intel_amx", "cuda") answered it too."""
    for name in ("auto", "intel_amx", None):
        with pytest.raises(ValueError, match="answers for kernels"):
            refusal_on(name, "cpu")  # type: ignore[arg-type]


def _base_field_reads() -> dict[str, list[int]]:
    reads: dict[str, list[int]] = {}
    for path in [*ROOT.glob("packages/*/src/**/*.py"), *ROOT.glob("tools/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            attribute = isinstance(node, ast.Attribute) and node.attr == "attention_backend"
            named = isinstance(node, ast.Constant) and node.value == "attention_backend"
            if attribute or named:
                reads.setdefault(str(path.relative_to(ROOT)), []).append(node.lineno)  # type: ignore[attr-defined]
    return reads


def test_no_other_code_reads_the_base_field() -> None:
    """Reverse-verified: a runner deciding its compiled gate from `get_exec().kernel.attention_backend`
    failed here, naming runner.py; and a reader removed from the code but left in the map fails too."""
    reads = _base_field_reads()
    unexpected = {path: lines for path, lines in reads.items() if path not in BASE_FIELD_READERS}
    assert not unexpected, (
        f"these read the base field attention_backend; ask attention_backends() or the stamp for a half: {unexpected}"
    )
    stale = set(BASE_FIELD_READERS) - set(reads)
    assert not stale, f"listed as base-field readers but no longer read it (drop them from the map): {stale}"
