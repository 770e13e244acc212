"""One vector of a sequence's last hidden rows, pooled and normalized as the checkpoint says.

Each sequence is pooled from its own rows alone, in a reduction of the same shape whatever it is
batched with, so its vector is bitwise the same alone or in any batch."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from runtime_runner.loading.sentence_pooling import PoolingSpec


def pooled(rows: torch.Tensor, spec: PoolingSpec) -> torch.Tensor:
    """The fp32 vector [hidden] of one sequence's rows [length, hidden] (length >= 1)."""
    rows = rows.float()
    if spec.mode == "mean":
        vector = rows.sum(dim=0) / rows.shape[0]  # sentence-transformers' sum over the mask, over its count
    elif spec.mode == "cls":
        vector = rows[0]
    else:
        vector = rows[-1]
    return F.normalize(vector, p=2.0, dim=0) if spec.normalize else vector
