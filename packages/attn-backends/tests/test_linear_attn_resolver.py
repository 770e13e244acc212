"""The linear-attention resolver: what the operator named wins, a runner's own default stands in
for an unnamed prefill, the device's kernels for an unnamed base; a default's gate is not even
asked (no device probe, no log line) when the operator named a kernel; the backend is built from
the stamp on the runner and from nothing else.

Reverse-verified by hand: with the resolver asking the gate before it checks the operator's
leaves, test_the_gate_declines_early_without_probing_or_logging fails on the probe.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

import config_bags
from attn_backends import LinearAttnBackendFactory, resolve_linear_attn_backends
from attn_backends.linear import resolver as linear_attn_resolver
from config_bags.server import Bags, ExecBag, KernelBag, LinearAttnBackends, device_linear_attn_backend_of


@pytest.fixture
def published() -> Iterator[None]:
    config_bags.unpublish()
    yield
    config_bags.unpublish()


def _publish(**kernel: str) -> None:
    config_bags.unpublish()
    config_bags.publish(Bags(exec=ExecBag(kernel=KernelBag(**kernel))), role="standalone")  # type: ignore[arg-type]


def test_the_device_kernels_stand_in_for_an_unnamed_base(published: None) -> None:
    _publish()
    assert device_linear_attn_backend_of("cpu") == "cpu_fused" and device_linear_attn_backend_of("cuda") == "triton"
    assert resolve_linear_attn_backends(device_type="cpu") == LinearAttnBackends(
        decode="cpu_fused", prefill="cpu_fused", verify="cpu_fused"
    )
    assert resolve_linear_attn_backends(device_type="cuda") == LinearAttnBackends(
        decode="triton", prefill="triton", verify="triton"
    )


def test_a_runners_default_stands_in_for_an_unnamed_prefill_and_what_the_operator_named_wins(published: None) -> None:
    _publish()
    assert resolve_linear_attn_backends("torch_native", device_type="cpu") == LinearAttnBackends(
        decode="cpu_fused", prefill="torch_native", verify="torch_native"
    )
    _publish(linear_attn_prefill_backend="cpu_fused", linear_attn_decode_backend="torch_native")
    assert resolve_linear_attn_backends("torch_native", device_type="cpu") == LinearAttnBackends(
        decode="torch_native", prefill="cpu_fused", verify="cpu_fused"
    )
    _publish(linear_attn_backend="torch_native")
    assert resolve_linear_attn_backends(device_type="cpu") == LinearAttnBackends(
        decode="torch_native", prefill="torch_native", verify="torch_native"
    )


def test_the_answer_is_frozen(published: None) -> None:
    _publish()
    backends = resolve_linear_attn_backends(device_type="cpu")
    with pytest.raises(AttributeError):
        backends.prefill = "triton"  # type: ignore[misc]


@pytest.mark.parametrize(
    "named", [{"linear_attn_prefill_backend": "cpu_fused"}, {"linear_attn_backend": "torch_native"}]
)
def test_the_gate_declines_early_without_probing_or_logging(
    named: dict[str, str], published: None, caplog: pytest.LogCaptureFixture
) -> None:
    def probe() -> None:
        raise AssertionError("the device was probed although the operator named a kernel")

    _publish(**named)
    with caplog.at_level(logging.DEBUG, logger=linear_attn_resolver.__name__):
        backends = resolve_linear_attn_backends(probe, device_type="cpu")  # type: ignore[arg-type]
    assert backends.prefill == named.get("linear_attn_prefill_backend", named.get("linear_attn_backend"))
    assert caplog.records == []


def test_the_gate_is_asked_and_says_so_when_nothing_was_named(
    published: None, caplog: pytest.LogCaptureFixture
) -> None:
    _publish()
    with caplog.at_level(logging.INFO, logger=linear_attn_resolver.__name__):
        assert resolve_linear_attn_backends(lambda: "torch_native", device_type="cpu").prefill == "torch_native"
        assert resolve_linear_attn_backends(lambda: None, device_type="cpu").prefill == "cpu_fused"
    assert [r.getMessage() for r in caplog.records] == [
        "this runner prefills its linear-attention layers with torch_native (its per-runner default)"
    ]


def test_a_draft_resolves_without_the_targets_default(published: None) -> None:
    _publish()
    asked: list[str] = []

    def gate(device_type: str) -> str:
        asked.append(device_type)
        return "torch_native"

    factory = LinearAttnBackendFactory(target_prefill_default=gate)  # type: ignore[arg-type]
    assert factory.resolve(device_type="cpu", is_draft=False).prefill == "torch_native"
    assert factory.resolve(device_type="cpu", is_draft=True) == LinearAttnBackends(
        decode="cpu_fused", prefill="cpu_fused", verify="cpu_fused"
    )
    assert asked == ["cpu"]
    assert LinearAttnBackendFactory().resolve(device_type="cpu", is_draft=False).prefill == "cpu_fused"


class _Runner:
    """A runner as the factory sees it: an object that may hold the stamp."""


def test_the_backend_is_built_from_the_stamp_on_its_runner(published: None) -> None:
    _publish()
    factory, runner = LinearAttnBackendFactory(), _Runner()
    with pytest.raises(AttributeError, match="linear_attn_backends"):
        factory.build(runner, device_type="cpu")  # type: ignore[arg-type]
    runner.linear_attn_backends = LinearAttnBackends(decode="cpu_fused", prefill="torch_native", verify="torch_native")  # type: ignore[attr-defined]
    backend = factory.build(runner, device_type="cpu")  # type: ignore[arg-type]
    assert (backend.decode.name, backend.prefill.name, backend.verify.name) == (
        "cpu_fused",
        "torch_native",
        "torch_native",
    )
