"""A sparse mixture-of-experts MLP with a gated shared expert (Qwen3-Next's), on packed projections.

Each token's router probabilities are a softmax over every expert in fp32; it takes the top k,
renormalised to sum to one when the config says so (norm_topk_prob), and its output is the
probability-weighted sum of those experts' gated MLPs plus sigmoid(shared gate) times the shared
expert's. Experts run one at a time over the rows routed to them, in expert order, so a row's sum
is accumulated in the same order whatever else is in the batch.
"""

from __future__ import annotations

import torch

from runtime_runner.loading.hybrid_config import MoeShape
from runtime_runner.models.matrix_projection import Projection
from runtime_runner.models.mlp_activation import silu_and_mul
from runtime_runner.models.whole_vectors import in_whole_vectors


class DenseMlp:
    """down(silu(gate(x)) * up(x)) over a fused [gate | up] projection."""

    def __init__(self, gate_up: Projection, down: Projection) -> None:
        self.gate_up, self.down = gate_up, down

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """The MLP's output rows for rows x."""
        return self.down(silu_and_mul(self.gate_up(x)))


class SparseMoe:
    """The routed experts and the gated shared expert of one layer."""

    def __init__(
        self,
        shape: MoeShape,
        router: Projection,
        experts: tuple[DenseMlp, ...],
        shared: DenseMlp | None,
        shared_gate: Projection | None,
    ) -> None:
        self.shape, self.router, self.experts, self.shared, self.shared_gate = (
            shape,
            router,
            experts,
            shared,
            shared_gate,
        )

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """The layer's MLP output rows for rows x [T, hidden]."""
        probs = torch.softmax(self.router(x).float(), dim=-1)
        weights, chosen = torch.topk(probs, self.shape.top_k, dim=-1)
        if self.shape.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        weights = weights.to(x.dtype)
        out = torch.zeros_like(x)
        hits = torch.bincount(chosen.flatten(), minlength=len(self.experts)).tolist()
        for e, expert in enumerate(self.experts):
            if hits[e] == 0:
                continue
            rows, slot = torch.nonzero(chosen == e, as_tuple=True)
            out.index_add_(0, rows, expert(x.index_select(0, rows)) * weights[rows, slot, None])
        if self.shared is not None and self.shared_gate is not None:
            out = out + in_whole_vectors(torch.sigmoid, self.shared_gate(x)) * self.shared(x)
        return out
