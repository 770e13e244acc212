"""attention_choice resolves a configured name for a half on a host and answers both of the kernel's
refusals, neither hiding the other: the factory and serve's launch rules state them from here."""

from __future__ import annotations

import pytest

from attn_backends import attention_choice, batch_invariance_refusal, refusal_on


def test_a_kernel_refused_on_the_host_and_for_invariance_answers_both(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reverse-verified: answering no batch-invariance refusal where the host refuses left it None here."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    choice = attention_choice("triton", half="decode", device_type="cpu", batch_invariant=True)
    assert (choice.kernel, choice.builds) == ("triton", "")
    assert choice.host_refusal == refusal_on("triton", "cpu") is not None
    assert choice.invariance_refusal == batch_invariance_refusal("triton") is not None


def test_auto_and_an_alias_say_what_they_build_and_only_a_batch_invariant_runner_is_asked_for_invariance() -> None:
    auto = attention_choice("auto", half="prefill", device_type="cpu", batch_invariant=False)
    assert (auto.kernel, auto.builds, auto.host_refusal, auto.invariance_refusal) == (
        "torch_native",
        " (builds torch_native for the prefill half)",
        None,
        None,
    )
    invariant = attention_choice("auto", half="prefill", device_type="cpu", batch_invariant=True)
    assert (invariant.kernel, invariant.invariance_refusal) == ("cpu_paged", None)
    alias = attention_choice("intel_amx", half="decode", device_type="cuda", batch_invariant=False)
    assert alias.builds == " (builds cpu_paged for the decode half)"
    assert alias.host_refusal == refusal_on("cpu_paged", "cuda") is not None
