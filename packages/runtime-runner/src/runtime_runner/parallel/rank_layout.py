"""Which rows and columns of a Llama-family decoder one rank of a tensor-parallel group holds.

With `size` ranks, rank r holds:
- query heads r*H/size ... (H = num_attention_heads, which `size` must divide);
- key/value heads: split the same way when `size` divides num_key_value_heads; replicated when
  num_key_value_heads divides `size` (each rank holds the one head its query heads share, so
  size / num_key_value_heads ranks hold each); any other pair is refused, since a rank's query
  heads would then need KV heads another rank holds;
- intermediate rows r*I/size ... of the MLP (I = intermediate_size, which `size` must divide);
- vocabulary rows r*ceil(V/size) ... of the embedding and LM head (the last rank's range may be
  short: its LM head is padded with zero rows so every rank's logits have the same width).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from runtime_runner.errors import UnsupportedConfigError
from runtime_runner.loading.arch_config import ArchConfig


def tensor_parallel_refusal(
    num_attention_heads: int, num_key_value_heads: int, intermediate_size: int, tp_size: int
) -> str | None:
    """Why a decoder of this shape cannot be split over `tp_size` ranks, as the equation that
    fails with its values; None when it can."""
    if num_attention_heads % tp_size:
        return f"num_attention_heads = {num_attention_heads} not divisible by tp_size = {tp_size}"
    if num_key_value_heads % tp_size and tp_size % num_key_value_heads:
        return (
            f"num_key_value_heads = {num_key_value_heads} neither divisible by tp_size = {tp_size} (split) nor "
            "dividing it (replicated)"
        )
    if intermediate_size % tp_size:
        return f"intermediate_size = {intermediate_size} not divisible by tp_size = {tp_size}"
    return None


def kv_heads_per_rank(num_key_value_heads: int, tp_size: int) -> int:
    """KV heads each rank holds in its pool: its share when split, one when replicated."""
    return num_key_value_heads // tp_size if num_key_value_heads % tp_size == 0 else 1


@dataclass(frozen=True)
class RankLayout:
    """What one rank holds, as ranges over the whole checkpoint's heads, intermediate rows and
    vocabulary, with the whole model's sizes the offsets are taken from."""

    rank: int
    size: int
    heads: range
    kv_heads: range
    intermediate: range
    vocab: range
    vocab_rows: int  # rows of every rank's LM head (its vocabulary range, padded)
    head_dim: int
    num_heads: int  # the whole model's, for offsets into its fused q|k|v rows
    num_kv_heads: int
    intermediate_size: int

    @classmethod
    def of(cls, cfg: ArchConfig, rank: int, size: int) -> RankLayout:
        """Rank `rank` of `size` over `cfg`'s decoder; UnsupportedConfigError when the shape does
        not split over `size` ranks, stating the equation that fails."""
        reason = tensor_parallel_refusal(cfg.num_heads, cfg.num_kv_heads, cfg.intermediate_size, size)
        if reason is not None:
            raise UnsupportedConfigError(
                f"{reason}: {cfg.architecture} cannot be split over {size} tensor-parallel ranks; accepted: "
                "a tp_size dividing num_attention_heads and intermediate_size, and dividing or divided by "
                "num_key_value_heads"
            )
        if not 0 <= rank < size:
            raise ValueError(f"rank = {rank} is not a rank of a group of {size}; accepted: 0 to {size - 1}")
        heads, kv_heads, inter = (
            cfg.num_heads // size,
            kv_heads_per_rank(cfg.num_kv_heads, size),
            cfg.intermediate_size // size,
        )
        # Replicated: the rank's query heads start at head rank*heads, in group (num_heads / num_kv_heads) of that head.
        kv_first = (
            rank * kv_heads if cfg.num_kv_heads % size == 0 else rank * heads // (cfg.num_heads // cfg.num_kv_heads)
        )
        vocab_rows = -(-cfg.vocab_size // size)
        return cls(
            rank=rank,
            size=size,
            heads=range(rank * heads, (rank + 1) * heads),
            kv_heads=range(kv_first, kv_first + kv_heads),
            intermediate=range(rank * inter, (rank + 1) * inter),
            vocab=range(min(rank * vocab_rows, cfg.vocab_size), min((rank + 1) * vocab_rows, cfg.vocab_size)),
            vocab_rows=vocab_rows,
            head_dim=cfg.head_dim,
            num_heads=cfg.num_heads,
            num_kv_heads=cfg.num_kv_heads,
            intermediate_size=cfg.intermediate_size,
        )

    @property
    def kv_replicated(self) -> bool:
        """Whether other ranks hold this rank's KV heads too (num_key_value_heads < size)."""
        return self.num_kv_heads % self.size != 0

    def arch(self, cfg: ArchConfig) -> ArchConfig:
        """The decoder shape this rank computes: its heads, KV heads and intermediate rows (the
        vocabulary stays whole: the gathered logits cover all of it)."""
        return replace(
            cfg, num_heads=len(self.heads), num_kv_heads=len(self.kv_heads), intermediate_size=len(self.intermediate)
        )
