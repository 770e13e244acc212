"""One rank's slices of a loaded decoder's weights (the rows and columns rank_layout
names), copied out so the whole matrices can be freed: each rank reads the whole checkpoint once
and keeps 1/size of every projection, embedding and LM head.

Column-parallel matrices (q|k|v, gate|up, the embedding, the LM head) keep their rank's output
rows, row-parallel ones (o, down) their rank's input columns. Norms stay whole, and so do the
biases of o and down, which are added once, after the ranks' partial products are summed.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from runtime_runner.errors import UnsupportedConfigError
from runtime_runner.loading.decoder_weights import DecoderWeights, LayerWeights
from runtime_runner.parallel.rank_layout import RankLayout


def _dense(matrix: object, name: str) -> torch.Tensor:
    if not isinstance(matrix, torch.Tensor):
        raise UnsupportedConfigError(
            f"tensor parallelism slices dense weight matrices; {name} is held quantized "
            f"({type(matrix).__name__}); accepted: tp_size = 1 with quantized weights, or a dense checkpoint"
        )
    return matrix


def _index(*ranges: range) -> torch.Tensor:
    return torch.cat([torch.arange(r.start, r.stop) for r in ranges])


def _rows(matrix: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return matrix.index_select(0, index.to(matrix.device))


def _columns(matrix: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return matrix.index_select(1, index.to(matrix.device))


def _scaled(r: range, by: int, offset: int = 0) -> range:
    """The element range of heads (or rows) `r` of width `by`, after `offset` elements."""
    return range(offset + r.start * by, offset + r.stop * by)


def _layer_slices(layer: LayerWeights, layout: RankLayout, index: int) -> LayerWeights:
    d, q_rows, kv_rows = layout.head_dim, layout.num_heads * layout.head_dim, layout.num_kv_heads * layout.head_dim
    qkv = _index(
        _scaled(layout.heads, d), _scaled(layout.kv_heads, d, q_rows), _scaled(layout.kv_heads, d, q_rows + kv_rows)
    )
    gate_up = _index(layout.intermediate, _scaled(layout.intermediate, 1, layout.intermediate_size))
    prefix = f"layer {index}'s"
    return replace(
        layer,
        qkv=_rows(_dense(layer.qkv, f"{prefix} q|k|v projection"), qkv),
        qkv_bias=None if layer.qkv_bias is None else _rows(layer.qkv_bias, qkv),
        o_proj=_columns(_dense(layer.o_proj, f"{prefix} o projection"), _index(_scaled(layout.heads, d))),
        gate_up=_rows(_dense(layer.gate_up, f"{prefix} gate|up projection"), gate_up),
        gate_up_bias=None if layer.gate_up_bias is None else _rows(layer.gate_up_bias, gate_up),
        down=_columns(_dense(layer.down, f"{prefix} down projection"), _index(layout.intermediate)),
    )


def _vocabulary_rows(matrix: torch.Tensor, layout: RankLayout) -> torch.Tensor:
    """The rank's vocabulary rows, padded with zero rows to `vocab_rows`."""
    rows = _rows(matrix, _index(layout.vocab))
    missing = layout.vocab_rows - len(layout.vocab)
    return rows if not missing else torch.cat([rows, rows.new_zeros(missing, rows.shape[1])])


def rank_weights(weights: DecoderWeights, layout: RankLayout) -> DecoderWeights:
    """The slices of `weights` rank `layout.rank` holds; a tied LM head stays one tensor with the
    embedding. UnsupportedConfigError for a matrix held quantized (its blocks run along the input
    columns a row-parallel slice cuts)."""
    embed = _vocabulary_rows(_dense(weights.embed, "the embedding"), layout)
    lm_head = (
        embed if weights.lm_head is weights.embed else _vocabulary_rows(_dense(weights.lm_head, "the LM head"), layout)
    )
    layers = tuple(_layer_slices(layer, layout, i) for i, layer in enumerate(weights.layers))
    return replace(weights, embed=embed, layers=layers, lm_head=lm_head)
