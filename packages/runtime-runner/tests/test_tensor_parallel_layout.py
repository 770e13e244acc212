"""Which heads, KV heads, intermediate rows and vocabulary rows each tensor-parallel rank holds,
and which shapes are refused, stated as the equation that fails."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from runtime_runner.errors import UnsupportedConfigError
from runtime_runner.loading.arch_config import ArchConfig, RopeSpec
from runtime_runner.loading.decoder_weights import DecoderWeights, LayerWeights
from runtime_runner.parallel.rank_layout import RankLayout, kv_heads_per_rank, tensor_parallel_refusal
from runtime_runner.parallel.rank_weights import rank_weights

BASE = ArchConfig(
    architecture="LlamaForCausalLM",
    vocab_size=67,
    hidden_size=8,
    intermediate_size=12,
    num_layers=1,
    num_heads=4,
    num_kv_heads=2,
    head_dim=2,
    rms_norm_eps=1e-6,
    max_position_embeddings=64,
    rope=RopeSpec(10000.0, "default", ()),
    tie_word_embeddings=False,
    attention_bias=False,
    mlp_bias=False,
    checkpoint_dtype="float32",
    eos_token_ids=(),
)


def test_kv_heads_split_when_the_ranks_divide_them() -> None:
    layouts = [RankLayout.of(BASE, rank, 2) for rank in range(2)]
    assert [(layout.heads, layout.kv_heads, layout.intermediate) for layout in layouts] == [
        (range(0, 2), range(0, 1), range(0, 6)),
        (range(2, 4), range(1, 2), range(6, 12)),
    ]
    assert not layouts[0].kv_replicated
    assert (
        layouts[1].arch(BASE).num_heads == 2
        and layouts[1].arch(BASE).num_kv_heads == 1
        and layouts[1].arch(BASE).vocab_size == 67
    )


def test_kv_heads_replicated_when_they_divide_the_ranks() -> None:
    """Four ranks over 2 KV heads: each rank's query heads share one KV head, held by two ranks."""
    layouts = [RankLayout.of(BASE, rank, 4) for rank in range(4)]
    assert [(layout.heads.start, layout.kv_heads) for layout in layouts] == [
        (0, range(0, 1)),
        (1, range(0, 1)),
        (2, range(1, 2)),
        (3, range(1, 2)),
    ]
    assert all(layout.kv_replicated for layout in layouts) and kv_heads_per_rank(2, 4) == 1


def test_the_vocabulary_splits_unevenly_and_the_last_rank_pads() -> None:
    layouts = [RankLayout.of(BASE, rank, 2) for rank in range(2)]
    assert [layout.vocab for layout in layouts] == [range(0, 34), range(34, 67)] and {
        layout.vocab_rows for layout in layouts
    } == {34}


@pytest.mark.parametrize(
    ("heads", "kv_heads", "intermediate", "tp", "message"),
    [
        (9, 3, 1536, 2, "num_attention_heads = 9 not divisible by tp_size = 2"),
        (24, 6, 64, 4, "num_key_value_heads = 6 neither divisible by tp_size = 4 (split) nor dividing it (replicated)"),
        (4, 2, 10, 4, "intermediate_size = 10 not divisible by tp_size = 4"),
    ],
)
def test_a_shape_that_does_not_split_is_refused_with_its_equation(
    heads: int, kv_heads: int, intermediate: int, tp: int, message: str
) -> None:
    assert tensor_parallel_refusal(heads, kv_heads, intermediate, tp) == message
    with pytest.raises(UnsupportedConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RankLayout.of(replace(BASE, num_heads=heads, num_kv_heads=kv_heads, intermediate_size=intermediate), 0, tp)


def test_a_rank_keeps_its_rows_and_columns_of_every_matrix() -> None:
    """q|k|v and gate|up keep the rank's output rows, o and down its input columns, the embedding
    and LM head its vocabulary rows (padded); biases of o and down stay whole."""
    q, kv, inter, hidden = 8, 4, 12, 8
    arange = lambda rows, cols: torch.arange(rows * cols, dtype=torch.float32).view(rows, cols)  # noqa: E731
    layer = LayerWeights(
        input_norm=torch.ones(hidden),
        qkv=arange(q + 2 * kv, hidden),
        qkv_bias=torch.arange(q + 2 * kv, dtype=torch.float32),
        q_norm=None,
        k_norm=None,
        o_proj=arange(hidden, q),
        o_bias=torch.ones(hidden),
        post_norm=torch.ones(hidden),
        gate_up=arange(2 * inter, hidden),
        gate_up_bias=None,
        down=arange(hidden, inter),
        down_bias=None,
    )
    weights = DecoderWeights(
        embed=arange(67, hidden), layers=(layer,), final_norm=torch.ones(hidden), lm_head=arange(67, hidden)
    )
    mine = rank_weights(weights, RankLayout.of(BASE, 1, 2)).layers[0]
    assert mine.qkv_bias is not None and mine.qkv_bias.tolist() == [
        4,
        5,
        6,
        7,
        10,
        11,
        14,
        15,
    ]  # q heads 2-3, k head 1, v head 1
    assert torch.equal(mine.o_proj, layer.o_proj[:, 4:8]) and mine.o_bias is layer.o_bias
    assert torch.equal(mine.gate_up, torch.cat([layer.gate_up[6:12], layer.gate_up[18:24]]))
    assert torch.equal(mine.down, layer.down[:, 6:12])
    head = rank_weights(weights, RankLayout.of(BASE, 1, 2)).lm_head
    assert head.shape == (34, hidden) and torch.equal(head[:33], weights.lm_head[34:]) and not head[33].any()
