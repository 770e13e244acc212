"""What the runner needs from linear attention, declared as protocols.

`serve` (and the cross-package tests) wire `attn_backends.LinearAttnBackendFactory` in; the runner
never imports attn_backends. A runner whose model has linear-attention layers asks the factory for
its choice of kernels per phase, stamps it on itself as `linear_attn_backends`, then has the
factory build the linear layers' backend for it, which reads the stamp off the runner.
"""

from __future__ import annotations

from typing import Protocol

import torch

from config_bags.server import LinearAttnBackends


class LinearAttnKernelsView(Protocol):
    """One set of linear-attention kernels (attn_backends.LinearAttnKernels fits)."""

    @property
    def name(self) -> str: ...

    def gated_delta_prefill(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        g: torch.Tensor,
        beta: torch.Tensor,
        cu_seqlens: torch.Tensor,
        state: torch.Tensor,
        slots: torch.Tensor,
        has_initial: torch.Tensor,
    ) -> torch.Tensor: ...

    def gated_delta_decode(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        g: torch.Tensor,
        beta: torch.Tensor,
        state: torch.Tensor,
        slots: torch.Tensor,
    ) -> torch.Tensor: ...

    def gated_delta_verify(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        g: torch.Tensor,
        beta: torch.Tensor,
        cu_seqlens: torch.Tensor,
        state: torch.Tensor,
        slots: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]: ...

    def causal_conv_prefill(
        self,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        cu_seqlens: torch.Tensor,
        conv_state: torch.Tensor,
        slots: torch.Tensor,
        has_initial: torch.Tensor,
    ) -> torch.Tensor: ...

    def causal_conv_decode(
        self,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        conv_state: torch.Tensor,
        slots: torch.Tensor,
    ) -> torch.Tensor: ...

    def causal_conv_verify(
        self,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        cu_seqlens: torch.Tensor,
        conv_state: torch.Tensor,
        slots: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]: ...


class LinearAttnBackendView(Protocol):
    """The linear layers' backend built for one runner: the kernels of each phase, as its stamp names them."""

    @property
    def prefill(self) -> LinearAttnKernelsView: ...
    @property
    def decode(self) -> LinearAttnKernelsView: ...
    @property
    def verify(self) -> LinearAttnKernelsView: ...


class StampedRunner(Protocol):
    """A runner after its linear-attention stamp."""

    linear_attn_backends: LinearAttnBackends


class LinearAttnFactory(Protocol):
    """Resolves a runner's linear-attention kernels (its per-runner default, under what the operator
    named) and builds the backend that reads them off the stamped runner."""

    def resolve(self, *, device_type: str, is_draft: bool) -> LinearAttnBackends: ...

    def build(self, runner: StampedRunner, *, device_type: str) -> LinearAttnBackendView: ...
