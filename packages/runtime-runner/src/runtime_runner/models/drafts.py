"""The draft entry classes: a speculative draft checkpoint loaded for a target, one class per family.

A draft is its own entry class, not a subclass of its target: the loader asks it every decision
(runtime_runner.loading.loader_hooks), so each draft answers every hook its target family answers, by
delegating to that family's decision (tests/test_draft_entry_hook_parity.py holds them to it). A
draft class names its family once, `class QwenDraft(DraftDecoder, family=Qwen2ForCausalLM)`, and
DraftDecoder writes the delegation of every hook.

A draft keeps no copy of what it can take from its target: the embedding matrix, and the LM head
with its packed projection (on a CPU a second copy of the matrix in the kernel's layout), when the
draft checkpoint holds them bitwise equal to the target's or does not hold them at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

import torch

from runtime_runner.errors import UnsupportedConfigError
from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.loading.checkpoint import CheckpointReader
from runtime_runner.loading.decoder_weights import DecoderWeights, load_decoder_weights
from runtime_runner.loading.loader_hooks import LOADER_HOOKS, FusedProjections, decisions_of
from runtime_runner.loading.tensor_names import EMBED, LM_HEAD
from runtime_runner.models.decoder import (
    DecoderForCausalLM,
    LlamaForCausalLM,
    Qwen2ForCausalLM,
    Qwen3ForCausalLM,
    TargetDecoder,
)
from runtime_runner.models.matrix_projection import kernel_copy_bytes
from runtime_runner.models.rope import RopeTable


def _delegated(family: type[TargetDecoder], hook: str) -> classmethod[Any, [ArchConfig], object]:
    """A draft class's loader hook `hook`: `family`'s answer, asked of the family itself."""

    def answer(cls: type, cfg: ArchConfig) -> object:
        return getattr(family, hook)(cfg)

    answer.__name__ = answer.__qualname__ = hook
    answer.__doc__ = f"{family.__name__}'s."
    return classmethod(answer)


class DraftDecoder(DecoderForCausalLM):
    """A draft checkpoint loaded for a target, run by a runner exactly as a target is. It answers no
    loader hook itself: each draft class answers its family's."""

    def __init_subclass__(cls, *, family: type[TargetDecoder], **kwargs: Any) -> None:
        """A draft class of `family`: keyed by the family's architecture, and answering every loader
        hook the family answers, and no other, with the family's decision (the embedding and LM
        head it expects may still be the target's: the loader holds them in hand)."""
        super().__init_subclass__(**kwargs)
        cls.architecture = family.architecture
        for hook in LOADER_HOOKS:
            if getattr(family, hook, None) is not None:
                setattr(cls, hook, _delegated(family, hook))

    def __init__(
        self,
        cfg: ArchConfig,
        weights: DecoderWeights,
        rope: RopeTable,
        *,
        batch_invariant: bool,
        fused: FusedProjections,
        target: DecoderForCausalLM,
    ) -> None:
        """Pack the draft's projections, taking the target's packed LM head where the draft's head is
        the target's matrix and both run the same kind of projection."""
        shares_head = weights.lm_head is target.weights.lm_head and batch_invariant == target.batch_invariant
        super().__init__(
            cfg,
            weights,
            rope,
            batch_invariant=batch_invariant,
            fused=fused,
            head_projection=target.head_projection if shares_head else None,
        )
        embed, head = weights.embed, weights.lm_head
        shared = embed.nbytes if isinstance(embed, torch.Tensor) and embed is target.weights.embed else 0
        if isinstance(head, torch.Tensor) and head is target.weights.lm_head and head is not embed:
            shared += head.nbytes
        if shares_head:
            shared += kernel_copy_bytes(self.head_projection)
        self._bytes_shared_with_target = shared

    @classmethod
    def load(
        cls,
        model_dir: Path,
        cfg: ArchConfig,
        dtype: torch.dtype,
        device: torch.device,
        *,
        batch_invariant: bool,
        target: DecoderForCausalLM,
    ) -> Self:
        """Load the draft checkpoint in `model_dir` for `target` as this class's loader decisions say:
        its embedding and LM head are the target's where the checkpoint holds them bitwise equal or
        lacks them. A draft over another vocabulary than the target's raises UnsupportedConfigError."""
        if cfg.vocab_size != target.cfg.vocab_size:
            raise UnsupportedConfigError(
                f"the draft checkpoint {model_dir} has vocab_size {cfg.vocab_size}, the target "
                f"{target.cfg.vocab_size}; accepted: a draft over the target's vocabulary"
            )
        decisions = decisions_of(cls, cfg)
        # A quantized target's embedding and head live only in its kernels: the draft reads its own, dense.
        in_hand = {
            name: held
            for name, held in ((EMBED, target.weights.embed), (LM_HEAD, target.weights.lm_head))
            if isinstance(held, torch.Tensor)
        }
        weights = load_decoder_weights(CheckpointReader(model_dir), cfg, decisions, dtype, device, in_hand=in_hand)
        rope = RopeTable.build(cfg.rope, cfg.head_dim, cfg.max_position_embeddings, dtype, device)
        return cls(
            cfg, weights, rope, batch_invariant=batch_invariant, fused=decisions.fused_projections, target=target
        )

    @property
    def bytes_shared_with_target(self) -> int:
        """Bytes this draft did not allocate because it holds the target's: the embedding, the LM
        head matrix (untied) and the LM head's packed copy; 0 when it shares nothing."""
        return self._bytes_shared_with_target


class LlamaDraftForCausalLM(DraftDecoder, family=LlamaForCausalLM):
    """A Llama draft: every loader decision is Llama's."""


class Qwen2DraftForCausalLM(DraftDecoder, family=Qwen2ForCausalLM):
    """A Qwen2 draft: Qwen2's q/k/v biases and fusion."""


class Qwen3DraftForCausalLM(DraftDecoder, family=Qwen3ForCausalLM):
    """A Qwen3 draft: Qwen3's q/k norms and fusion."""
