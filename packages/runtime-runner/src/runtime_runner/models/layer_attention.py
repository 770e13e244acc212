"""What a decoder layer calls for its attention, handed in by the runner for each forward.

A full-attention layer calls a `LayerAttention` (the runner writes the layer's new K/V into its
pool and runs its attention backend), a hybrid's linear-attention layer a `LinearLayerAttention`
(the runner runs its stamped linear-attention kernels over the request's recurrent-state slot), so
a decoder knows nothing about pages, slots or backends.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

# (layer index, q [T, H, D], k [T, KVH, D], v [T, KVH, D]) -> attention output [T, H, D]
LayerAttention = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
# (linear layer index, conv input [T, channels] = [q | k | v] before the conv, conv weight
# [channels, width], log decay g [T, value_heads] fp32, write strength beta [T, value_heads] fp32)
# -> the delta rule's output [T, value_heads, value_dim]
LinearLayerAttention = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
