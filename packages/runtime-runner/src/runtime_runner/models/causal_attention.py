"""Causal attention of each input over its own rows alone, with no KV cache: what a decoder's
layers attend with when it embeds (one forward per input, nothing kept for a next step).

The inputs' rows are packed into one [tokens, heads, head_dim] tensor for the decoder's row-wise
steps; here they are split back by length and each input attends to its own prefix in a
computation whose shape is its own length alone, on one torch thread, so its output is bitwise the
same alone or among any others."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from runtime_runner.models.layer_attention import LayerAttention
from runtime_runner.models.one_torch_thread import one_torch_thread


def causal_attention_of(lengths: Sequence[int], scale: float) -> LayerAttention:
    """The per-layer attention of inputs of `lengths` packed in order: scores and softmax in fp32
    (as transformers' eager attention), the output in the queries' dtype."""

    def attend(_layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        groups = q.shape[1] // k.shape[1]  # query heads per KV head (grouped-query attention)
        out: list[torch.Tensor] = []
        # One thread: an input's matmuls are too small to share, and the thread count would
        # otherwise be one more thing a row's bits could depend on.
        with one_torch_thread():
            for qs, ks, vs in zip(
                torch.split(q, list(lengths)), torch.split(k, list(lengths)), torch.split(v, list(lengths)), strict=True
            ):
                n = qs.shape[0]
                qh = qs.transpose(0, 1).float()
                kh = ks.transpose(0, 1).float().repeat_interleave(groups, dim=0)
                vh = vs.transpose(0, 1).float().repeat_interleave(groups, dim=0)
                scores = torch.matmul(qh, kh.transpose(1, 2)) * scale
                future = torch.ones(n, n, dtype=torch.bool).triu(1)
                weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
                out.append(torch.matmul(weights, vh).transpose(0, 1).to(q.dtype))
            return torch.cat(out)

    return attend
